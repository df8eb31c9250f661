package org.pategail.app

import android.content.Context
import java.io.File
import java.security.SecureRandom
import org.pategail.core.net.CoordinatorClient
import org.pategail.core.net.NetFrames

/**
 * The phone's link to a served run (`pategail serve`): the core's [CoordinatorClient] — the code path the JVM
 * tests run (`NetDevice`, tests/android) — on this app's store, with ONNX Runtime's trainer and policy runtime
 * behind [DeviceHolder]'s one [org.pategail.core.Device]. It enrols (with the operator's token, once), installs
 * the run's bundle, pins the coordinator's key, then long-polls for signed orders over HTTPS; a service with a
 * self-made CA is trusted through `filesDir/coordinator-ca.pem` (the CA the operator hands out).
 */
class CoordinatorLink(private val context: Context, budgetSeconds: Double) {
    private val store = DeviceHolder.storeDir(context)
    private val client = CoordinatorClient(
        BuildConfig.COORDINATOR_URL,
        File(context.filesDir, CA_FILE).takeIf { it.isFile },
        store,
        CoordinatorClient.Runtime({ _, deviceId, minibatches -> DeviceHolder.open(context, deviceId, minibatches) },
            SecureRandom(), SecureRandom().nextLong()),
        null,                                      // days come from the screen's import, before the first round
        DeviceHolder.coordinatorKey(),
        NetFrames.ANY_ID,
        DeviceHolder.enrolmentToken(context),
        CoordinatorClient.RetryPolicy(0.5, 30.0, budgetSeconds),
        20.0,
        SecureRandom(),
    )

    /** Take part until the run is over, [stop] is called, or the service stays silent for the budget. */
    fun run() = client.run()

    fun stop() = client.stop()

    companion object {
        const val CA_FILE = "coordinator-ca.pem"
    }
}
