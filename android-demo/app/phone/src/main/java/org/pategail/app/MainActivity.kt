package org.pategail.app

import android.net.Uri
import android.os.Bundle
import android.provider.OpenableColumns
import android.widget.Button
import android.widget.CheckBox
import android.widget.TextView
import androidx.activity.result.contract.ActivityResultContracts
import androidx.appcompat.app.AppCompatActivity
import java.io.File
import java.util.Locale
import java.util.concurrent.Executors
import org.pategail.core.net.NetFrames
import org.pategail.core.secagg.Bytes

/**
 * The owner's screen: install a model bundle, import days from a GPX/CSV file, give or withdraw consent to
 * take part, and read the device's status and privacy ledger (what left the phone, under which noise).
 */
class MainActivity : AppCompatActivity() {
    private val io = Executors.newSingleThreadExecutor()
    private lateinit var status: TextView
    private lateinit var ledger: TextView

    private val pickBundle = registerForActivityResult(ActivityResultContracts.OpenDocument()) { uri ->
        uri?.let { work("installing the bundle") { installBundle(it) } }
    }
    private val pickDays = registerForActivityResult(ActivityResultContracts.OpenDocument()) { uri ->
        uri?.let { work("importing days") { importDays(it) } }
    }

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_main)
        status = findViewById(R.id.status)
        ledger = findViewById(R.id.ledger)
        findViewById<Button>(R.id.install_bundle).setOnClickListener { pickBundle.launch(arrayOf("application/zip")) }
        findViewById<Button>(R.id.import_days).setOnClickListener { pickDays.launch(arrayOf("*/*")) }
        findViewById<CheckBox>(R.id.consent).apply {
            isChecked = DeviceHolder.consented(this@MainActivity)
            setOnCheckedChangeListener { _, checked ->
                DeviceHolder.setConsent(this@MainActivity, checked)
                if (checked) RoundWorker.schedule(this@MainActivity) else RoundWorker.cancel(this@MainActivity)
                refresh()
            }
        }
        refresh()
    }

    private fun displayName(uri: Uri): String =
        contentResolver.query(uri, arrayOf(OpenableColumns.DISPLAY_NAME), null, null, null)?.use {
            if (it.moveToFirst()) it.getString(0) else null
        } ?: uri.lastPathSegment ?: "file"

    private fun installBundle(uri: Uri): String {
        val name = displayName(uri)
        val dir = contentResolver.openInputStream(uri)!!.use { BundleImport.unzip(name, it, File(cacheDir, "bundle-import")) }
        try {
            val device = DeviceHolder.get(this)
            val bundle = synchronized(device) { device.installBundle(dir, null) }
            return getString(R.string.bundle_installed, bundle.sha256.take(12), bundle.cells.size)
        } finally {
            dir.deleteRecursively()
        }
    }

    private fun importDays(uri: Uri): String {
        val device = DeviceHolder.get(this)
        val bundle = device.bundle() ?: return getString(R.string.need_bundle)
        val name = displayName(uri)
        val fixes = contentResolver.openInputStream(uri)!!.use { FixImport.read(name, it) }
        val days = FixImport.toDays(fixes, bundle)
        val total = synchronized(device) { device.addDays(days) }
        return getString(R.string.days_imported, days.size, fixes.time.size, total)
    }

    private fun work(what: String, task: () -> String) {
        status.text = getString(R.string.working, what)
        io.execute {
            val message = try {
                task()
            } catch (e: Exception) {        // a user's file or bundle: one line, never a crash
                e.message ?: e.javaClass.simpleName
            }
            runOnUiThread {
                refresh()
                status.text = message + "\n\n" + status.text
            }
        }
    }

    private fun refresh() {
        io.execute {
            val device = DeviceHolder.get(this)
            val bundle = device.bundle()
            val text = getString(
                R.string.status,
                if (device.deviceId == NetFrames.ANY_ID) getString(R.string.not_enrolled)
                else device.deviceId.toString(),
                bundle?.sha256?.take(12) ?: getString(R.string.none),
                device.nDays(),
                device.policySha256()?.take(12) ?: getString(R.string.none),
                if (DeviceHolder.consented(this)) getString(R.string.taking_part) else getString(R.string.not_taking_part),
                Bytes.hex(device.identity().signingPublic),
                Bytes.hex(device.identity().envelopePublic),
            )
            val record = device.ledger()
            val entries = record.releases()
            val lines = entries.takeLast(20).reversed().joinToString("\n") {
                if (it.gaussian) {
                    String.format(Locale.ROOT, "%d × Gaussian vector release: σ %.3g, L2 sensitivity %.3g, %d shares",
                        it.count, it.noiseStd, it.sensitivity, it.shares)
                } else {
                    String.format(Locale.ROOT, "%d × Laplace query: scale %.3g (Σ D)%s", it.count, it.sumScale,
                        if (it.sqSumScale > 0) String.format(Locale.ROOT, ", %.3g (Σ D²)", it.sqSumScale) else "")
                }
            }
            val summary = getString(R.string.ledger, entries.size + record.unbounded(), record.epsilon())
            runOnUiThread {
                status.text = text
                ledger.text = if (entries.isEmpty() && record.unbounded() == 0) getString(R.string.ledger_empty) else "$summary\n$lines"
            }
        }
    }
}
