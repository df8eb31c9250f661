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
import java.util.Timer
import java.util.concurrent.TimeUnit
import kotlin.concurrent.timerTask
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.withContext
import org.pategail.core.net.ServiceException

/**
 * Takes part in a served run, only while the phone is charging and on an unmetered network and only with the
 * owner's consent: [CoordinatorLink] answers the service's signed orders (RoundRequest, PolicyUpdate, the five
 * secure-aggregation steps, liveness checks) with the core device until the run is over or WorkManager's time
 * is nearly up. A lost connection mid-round is a dropout, which the protocol tolerates; the next run of the
 * worker resumes from the store.
 */
class RoundWorker(context: Context, params: WorkerParameters) : CoroutineWorker(context, params) {
    override suspend fun doWork(): Result = withContext(Dispatchers.IO) {
        if (!DeviceHolder.consented(applicationContext)) return@withContext Result.success()
        val deadline = System.currentTimeMillis() + BUDGET_MS
        var watch: Timer? = null
        try {
            val link = CoordinatorLink(applicationContext, BUDGET_MS / 1000.0)
            watch = Timer(true).apply {       // WorkManager's stop, or the time budget: the client stops
                schedule(timerTask { if (isStopped || System.currentTimeMillis() > deadline) link.stop() }, 1000, 1000)
            }
            link.run()                        // enrols once, then long-polls for signed orders
            Result.success()
        } catch (e: ServiceException) {       // refused, unreachable for the budget, or a setting is wrong
            Log.i(TAG, "taking part stopped: ${e.message}")
            Result.retry()
        } catch (e: IOException) {
            Log.i(TAG, "the device's store failed: ${e.message}")
            Result.retry()
        } finally {
            watch?.cancel()
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
