package org.pategail.app

import android.util.Xml
import java.io.File
import java.io.InputStream
import java.time.Instant
import java.util.TimeZone
import java.util.zip.ZipInputStream
import org.pategail.core.Bundle
import org.pategail.core.DayBuilder
import org.xmlpull.v1.XmlPullParser

/** A user's file could not be read; the message names the file and the row or element. */
class ImportError(message: String) : Exception(message)

/** The owner's GPS fixes: unix seconds (UTC) and degrees. */
class Fixes(val time: LongArray, val lat: DoubleArray, val lon: DoubleArray)

object FixImport {
    /** GPX (trkpt lat/lon with a time element) or CSV with the header "time,lat,lon" (unix seconds or ISO-8601). */
    fun read(name: String, input: InputStream): Fixes =
        if (name.lowercase().endsWith(".gpx")) gpx(name, input) else csv(name, input)

    private fun parseTime(text: String): Long =
        text.trim().toLongOrNull() ?: Instant.parse(text.trim()).epochSecond

    fun csv(name: String, input: InputStream): Fixes {
        val lines = input.bufferedReader().readLines()
        if (lines.isEmpty() || lines[0].trim() != "time,lat,lon") {
            throw ImportError("$name: the header must be 'time,lat,lon'")
        }
        val t = ArrayList<Long>(); val la = ArrayList<Double>(); val lo = ArrayList<Double>()
        lines.drop(1).forEachIndexed { i, line ->
            if (line.isBlank()) return@forEachIndexed
            val parts = line.split(",")
            try {
                require(parts.size == 3)
                t.add(parseTime(parts[0])); la.add(parts[1].trim().toDouble()); lo.add(parts[2].trim().toDouble())
            } catch (e: Exception) {
                throw ImportError("$name: row ${i + 2}: expected time,lat,lon")
            }
        }
        return Fixes(t.toLongArray(), la.toDoubleArray(), lo.toDoubleArray())
    }

    fun gpx(name: String, input: InputStream): Fixes {
        val parser = Xml.newPullParser().apply { setInput(input, null) }
        val t = ArrayList<Long>(); val la = ArrayList<Double>(); val lo = ArrayList<Double>()
        var lat = Double.NaN; var lon = Double.NaN; var inPoint = false; var inTime = false
        while (parser.next() != XmlPullParser.END_DOCUMENT) {
            when (parser.eventType) {
                XmlPullParser.START_TAG -> when (parser.name) {
                    "trkpt" -> {
                        inPoint = true
                        lat = parser.getAttributeValue(null, "lat")?.toDoubleOrNull() ?: Double.NaN
                        lon = parser.getAttributeValue(null, "lon")?.toDoubleOrNull() ?: Double.NaN
                        if (lat.isNaN() || lon.isNaN()) throw ImportError("$name: line ${parser.lineNumber}: trkpt without lat/lon")
                    }
                    "time" -> inTime = inPoint
                }
                XmlPullParser.TEXT -> if (inTime) {
                    try {
                        t.add(parseTime(parser.text)); la.add(lat); lo.add(lon)
                    } catch (e: Exception) {
                        throw ImportError("$name: line ${parser.lineNumber}: unreadable time '${parser.text}'")
                    }
                    inTime = false
                }
                XmlPullParser.END_TAG -> if (parser.name == "trkpt") inPoint = false
            }
        }
        return Fixes(t.toLongArray(), la.toDoubleArray(), lo.toDoubleArray())
    }

    /** Days of the bundle's day cells (its public map when its table was released from one) from the fixes, in the
     * phone's time zone; days with < 6 observed slots dropped. */
    fun toDays(fixes: Fixes, bundle: Bundle): Array<IntArray> {
        val offsetHours = TimeZone.getDefault().getOffset(System.currentTimeMillis()) / 3_600_000.0
        return DayBuilder.fixesToDays(fixes.time, fixes.lat, fixes.lon, bundle.dayCells(), offsetHours, 6)
    }
}

object BundleImport {
    /** Unpack a bundle zip (flat: manifest.json and the files it lists) into [dest]; the device verifies it. */
    fun unzip(name: String, input: InputStream, dest: File): File {
        dest.deleteRecursively()
        dest.mkdirs()
        ZipInputStream(input).use { zip ->
            while (true) {
                val entry = zip.nextEntry ?: break
                if (entry.isDirectory) continue
                val plain = entry.name.substringAfterLast('/')
                if (plain.isEmpty() || plain == "." || plain == "..") throw ImportError("$name: bad entry ${entry.name}")
                File(dest, plain).outputStream().use { zip.copyTo(it) }
            }
        }
        if (!File(dest, Bundle.MANIFEST).isFile) throw ImportError("$name: no ${Bundle.MANIFEST} in the zip")
        return dest
    }
}
