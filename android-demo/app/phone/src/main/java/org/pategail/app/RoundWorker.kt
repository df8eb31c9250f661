package org.pategail.app

import android.content.Context
import android.util.Log
import androidx.work.Constraints
import androidx.work.CoroutineWorker
import androidx.work.ExistingPeriodicWorkPolicy
import androidx.work.NetworkType
import androidx.work.PeriodicWorkRequestBuilder
import androidx.work.WorkManager
import androidx.work.WorkerParameters
import java.io.IOException
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.withContext
import org.pategail.core.DeviceSession

/**
 * Takes part in the coordinator's rounds, only while the phone is charging and on an unmetered network and
 * only with the owner's consent: serves the coordinator's requests (RoundRequest, PolicyUpdate, the five
 * secure-aggregation steps) with the core device until the coordinator has nothing more, or WorkManager's
 * time is nearly up. A lost connection mid-round is a dropout, which the protocol tolerates.
 */
class RoundWorker(context: Context, params: WorkerParameters) : CoroutineWorker(context, params) {
    override suspend fun doWork(): Result = withContext(Dispatchers.IO) {
        if (!DeviceHolder.consented(applicationContext)) return@withContext Result.success()
        val device = DeviceHolder.get(applicationContext)
        val session = DeviceSession(device, DeviceHolder.coordinatorKey())
        val link = CoordinatorLink(BuildConfig.COORDINATOR_URL, device.deviceId)
        val deadline = System.currentTimeMillis() + BUDGET_MS
        try {
            while (!isStopped && System.currentTimeMillis() < deadline) {
                val request = link.next() ?: break
                // the core Device is not thread-safe: the screen and this worker take turns on it
                link.reply(synchronized(device) { session.serve(request.op, request.payload) })
            }
            Result.success()
        } catch (e: IOException) {
            Log.i(TAG, "coordinator unreachable: ${e.message}")
            Result.retry()
        }
    }

    companion object {
        private const val TAG = "pategail"
        private const val BUDGET_MS = 9 * 60 * 1000L          // WorkManager stops a worker after 10 minutes
        private const val WORK = "pategail-rounds"

        /** Hourly, when charging and on unmetered network (Wi-Fi); KEEP leaves a scheduled one as it is. */
        fun schedule(context: Context) {
            val constraints = Constraints.Builder()
                .setRequiresCharging(true)
                .setRequiredNetworkType(NetworkType.UNMETERED)
                .build()
            val request = PeriodicWorkRequestBuilder<RoundWorker>(1, TimeUnit.HOURS).setConstraints(constraints).build()
            WorkManager.getInstance(context).enqueueUniquePeriodicWork(WORK, ExistingPeriodicWorkPolicy.KEEP, request)
        }

        fun cancel(context: Context) {
            WorkManager.getInstance(context).cancelUniqueWork(WORK)
        }
    }
}
