package org.pategail.app

import android.content.Context
import java.io.File
import java.security.SecureRandom
import java.util.Random
import org.pategail.core.Device
import org.pategail.core.DeviceMessages
import org.pategail.core.secagg.Bytes

/**
 * The one core [Device] of this app, in its private storage (filesDir/device: days, bundle, checkpoint,
 * policy, identity, privacy ledger). The device id and the coordinator's key come from enrolment, which is
 * out of band (as in the Python SDK): a build property or the settings the owner entered.
 */
object DeviceHolder {
    private const val PREFS = "pategail"
    private var device: Device? = null

    @Synchronized
    fun get(context: Context): Device = device ?: Device(
        File(context.filesDir, "device"),
        deviceId(context),
        Random(SecureRandom().nextLong()),          // minibatch sampling; reproducibility is a desktop concern
        DeviceMessages.Limits.DEFAULT,
        OrtTrainer(),
        OrtPolicy(),
        SecureRandom(),
    ).also { device = it }

    /** The id the coordinator enrolled this phone under: a stored one, else the build's (-Ppategail.deviceId). */
    fun deviceId(context: Context): Long =
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).getLong("device_id", BuildConfig.DEVICE_ID)

    fun consented(context: Context): Boolean =
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).getBoolean("consent", false)

    fun setConsent(context: Context, value: Boolean) {
        context.getSharedPreferences(PREFS, Context.MODE_PRIVATE).edit().putBoolean("consent", value).apply()
    }

    /** The coordinator's Ed25519 key the app pins (hex in BuildConfig), or null when the build has none. */
    fun coordinatorKey(): ByteArray? = BuildConfig.COORDINATOR_KEY.takeIf { it.length == 64 }?.let { Bytes.unhex(it) }
}
