package org.pategail.app

import java.io.DataInputStream
import java.io.IOException
import java.net.HttpURLConnection
import java.net.URL
import org.pategail.core.DeviceSession

/**
 * The device's side of the coordinator's HTTP service: it pulls the next request and posts the reply, with
 * the envelope [DeviceSession] serves (request op u8 | length u32 | payload; reply status u8 | length u32 |
 * payload) around the SDK's own frames. GET {base}/v1/devices/{id}/next answers 200 with one request or 204
 * when the coordinator has nothing more for this session; POST {base}/v1/devices/{id}/reply takes the reply.
 * HTTPS only. (The coordinator's HTTP service is another issue; the same envelope runs over a pipe in the
 * tests, pategail.jvm_device.)
 */
class CoordinatorLink(private val base: String, private val deviceId: Long) {
    init {
        require(base.startsWith("https://")) { "the coordinator URL must be https: $base" }
    }

    class Request(val op: Int, val payload: ByteArray)

    fun next(): Request? {
        val c = URL("$base/v1/devices/$deviceId/next").openConnection() as HttpURLConnection
        c.connectTimeout = 15_000
        c.readTimeout = 120_000          // the coordinator may hold the request while a round step completes
        try {
            return when (c.responseCode) {
                HttpURLConnection.HTTP_NO_CONTENT -> null
                HttpURLConnection.HTTP_OK -> DataInputStream(c.inputStream).use { input ->
                    val op = input.readUnsignedByte()
                    val n = input.readInt()
                    if (n < 0 || n > MAX_REQUEST) throw IOException("request of $n bytes")
                    Request(op, ByteArray(n).also { input.readFully(it) })
                }
                else -> throw IOException("coordinator answered HTTP ${c.responseCode}")
            }
        } finally {
            c.disconnect()
        }
    }

    fun reply(reply: DeviceSession.Reply) {
        val c = URL("$base/v1/devices/$deviceId/reply").openConnection() as HttpURLConnection
        c.requestMethod = "POST"
        c.doOutput = true
        c.setRequestProperty("Content-Type", "application/octet-stream")
        c.connectTimeout = 15_000
        c.readTimeout = 60_000
        try {
            c.outputStream.use { it.write(reply.toBytes()) }
            if (c.responseCode !in 200..299) throw IOException("coordinator answered HTTP ${c.responseCode}")
        } finally {
            c.disconnect()
        }
    }

    companion object {
        const val MAX_REQUEST = 64 shl 20
    }
}
