package org.pategail.app

import android.content.Context
import java.io.File
import java.security.SecureRandom
import java.util.Random
import org.json.JSONObject
import org.pategail.core.Device
import org.pategail.core.DeviceMessages
import org.pategail.core.net.CoordinatorClient
import org.pategail.core.net.NetFrames
import org.pategail.core.secagg.Bytes

/**
 * The one core [Device] of this app, in its private storage (filesDir/device: days, bundle, checkpoint,
 * policy, identity, privacy ledger, network state). Its id comes from enrolment ([CoordinatorLink], kept in
 * the store's network.json); the coordinator's key is pinned by the build (-Ppategail.coordinatorKey) or on
 * first use.
 */
object DeviceHolder {
    private const val PREFS = "pategail"
    private var device: Device? = null

    fun storeDir(context: Context): File = File(context.filesDir, "device")

    /** The device under [deviceId], opened once (the screen and [RoundWorker] share it, synchronized on it). */
    @Synchronized
    fun open(context: Context, deviceId: Long, minibatches: Random): Device =
        device?.takeIf { it.deviceId == deviceId } ?: Device(
            storeDir(context), deviceId, minibatches, DeviceMessages.Limits.DEFAULT, OrtTrainer(), OrtPolicy(),
            OrtPolicyTrainer(), SecureRandom(),
        ).also { device = it }

    /** The device for the screen: the enrolled one, or before the first enrolment one under no id yet
     * ([NetFrames.ANY_ID]) — enough to install the cell table's bundle, import days and show the keys. */
    @Synchronized
    fun get(context: Context): Device = device ?: open(context, enrolledId(context) ?: NetFrames.ANY_ID, Random())

    /** The id the service gave this phone, from the store's network state. */
    fun enrolledId(context: Context): Long? {
        val state = File(storeDir(context), CoordinatorClient.STATE_FILE)
        return if (state.isFile) JSONObject(state.readText()).optLong("device_id", -1).takeIf { it >= 0 } else null
    }

    fun consented(context: Context): Boolean =
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).getBoolean("consent", false)

    fun setConsent(context: Context, value: Boolean) {
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).edit().putBoolean("consent", value).apply()
    }

    /** The single-use enrolment token the operator gave the owner (entered once; not needed after enrolment). */
    fun enrolmentToken(context: Context): String? =
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).getString("enrol_token", null)

    /** The coordinator's Ed25519 key the app pins (hex in BuildConfig), or null when the build has none. */
    fun coordinatorKey(): ByteArray? = BuildConfig.COORDINATOR_KEY.takeIf { it.length == 64 }?.let { Bytes.unhex(it) }
}
