package org.pategail.core.net;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.MalformedURLException;
import java.net.URL;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import java.util.Map;

import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * The device's side of the transport on {@link HttpURLConnection} (Android's own HTTP client; keep-alive is
 * the platform's connection pool): the service's address and CA file checked before anything is sent, and
 * failures told apart — a passing one (service unreachable, connection lost: {@link TransientFailure}, retried
 * by the caller) from a lasting one (an untrusted certificate, the wrong scheme: {@link ServiceException} at
 * once). Only APIs of Android 8.0 (minSdk 26).
 */
public final class HttpTransport {
    /** A failure worth retrying. */
    public static final class TransientFailure extends Exception {
        private static final long serialVersionUID = 1L;

        TransientFailure(String message) {
            super(message);
        }
    }

    /** Status and body of one answered request. */
    public static final class Response {
        public final int status;
        public final byte[] body;

        Response(int status, byte[] body) {
            this.status = status;
            this.body = body;
        }
    }

    public final boolean https;
    public final String host;
    public final int port;
    private final String base;
    private final SSLSocketFactory tls;
    private final int timeoutMs;
    private boolean answered;

    /**
     * @param server  {@code http(s)://HOST[:PORT]}, nothing after it
     * @param caFile  PEM CA certificates to verify an https service with (null: the platform's)
     * @param timeoutS read timeout of one request (a long poll's wait and some margin)
     */
    public HttpTransport(String server, File caFile, double timeoutS) throws ServiceException {
        URL url;
        try {
            url = new URL(server);
        } catch (MalformedURLException err) {
            throw new ServiceException("--server " + server + ": expected http://HOST:PORT or https://HOST:PORT");
        }
        if (!("http".equals(url.getProtocol()) || "https".equals(url.getProtocol())) || url.getHost().isEmpty()) {
            throw new ServiceException("--server " + server + ": expected http://HOST:PORT or https://HOST:PORT");
        }
        if (!(url.getPath().isEmpty() || "/".equals(url.getPath())) || url.getQuery() != null || url.getRef() != null
                || url.getUserInfo() != null) {
            throw new ServiceException("--server " + server + ": give the service's address only, http(s)://HOST:PORT "
                    + "(a path, query or user name is not supported)");
        }
        if (url.getPort() > 65535) {
            throw new ServiceException("--server " + server + ": not a valid port (1 to 65535)");
        }
        this.https = "https".equals(url.getProtocol());
        this.host = url.getHost();
        this.port = url.getPort() >= 0 ? url.getPort() : url.getDefaultPort();
        this.base = url.getProtocol() + "://" + url.getAuthority();
        this.tls = tlsFactory(caFile, https);
        this.timeoutMs = (int) Math.round(timeoutS * 1000);
    }

    /** The socket factory for an https service: trusting exactly the certificates of {@code caFile}, or the
     * platform's; a one-line error naming the file when it is missing or holds no PEM certificate. */
    static SSLSocketFactory tlsFactory(File caFile, boolean https) throws ServiceException {
        if (!https) {
            if (caFile != null) {
                throw new ServiceException("--cafile " + caFile + ": the service's address is http://, which uses no "
                        + "certificate (https:// for a TLS service)");
            }
            return null;
        }
        if (caFile == null) {
            return (SSLSocketFactory) SSLSocketFactory.getDefault();
        }
        if (!caFile.isFile()) {
            throw new ServiceException("--cafile " + caFile + ": no such file");
        }
        try (InputStream in = new FileInputStream(caFile)) {
            Collection<? extends Certificate> certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
            if (certs.isEmpty()) {
                throw new CertificateException("no certificate");
            }
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (Certificate c : certs) {
                store.setCertificateEntry("ca-" + i++, c);
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, tmf.getTrustManagers(), null);
            return context.getSocketFactory();
        } catch (CertificateException err) {
            throw new ServiceException("--cafile " + caFile + ": not CA certificates in PEM form (" + err.getMessage()
                    + ")");
        } catch (IOException | GeneralSecurityException err) {
            throw new ServiceException("--cafile " + caFile + ": unreadable (" + err.getMessage() + ")");
        }
    }

    /** One request: its status and body (any status), or a failure. */
    public Response request(String method, String pathAndQuery, byte[] body, Map<String, String> headers)
            throws TransientFailure, ServiceException {
        HttpURLConnection conn = null;
        boolean done = false;
        try {
            conn = (HttpURLConnection) new URL(base + pathAndQuery).openConnection();
            if (https) {
                ((HttpsURLConnection) conn).setSSLSocketFactory(tls);
            }
            conn.setConnectTimeout(Math.min(timeoutMs, 30_000));
            conn.setReadTimeout(timeoutMs);
            conn.setUseCaches(false);
            conn.setInstanceFollowRedirects(false);
            conn.setRequestMethod(method);
            for (Map.Entry<String, String> h : headers.entrySet()) {
                conn.setRequestProperty(h.getKey(), h.getValue());
            }
            if ("POST".equals(method)) {
                conn.setDoOutput(true);
                conn.setFixedLengthStreamingMode(body.length);
                conn.setRequestProperty("Content-Type", "application/octet-stream");
                try (OutputStream out = conn.getOutputStream()) {
                    out.write(body);
                }
            }
            int status = conn.getResponseCode();
            InputStream in = status >= 400 ? conn.getErrorStream() : conn.getInputStream();
            byte[] data = in == null ? new byte[0] : org.pategail.core.Bundle.readAll(in);
            answered = true;
            done = true;
            return new Response(status, data);
        } catch (SSLHandshakeException err) {
            if (untrusted(err)) {          // not a passing failure: never retried
                throw new ServiceException(host + ":" + port + ": the service's TLS certificate is not trusted ("
                        + rootMessage(err) + "); give the device its CA with --cafile, and reach the service by the "
                        + "host name its certificate names");
            }
            throw new TransientFailure("TLS handshake failed: " + rootMessage(err));
        } catch (SSLException err) {
            String message = String.valueOf(err.getMessage()).toLowerCase(java.util.Locale.ROOT);
            if (!answered && message.contains("plaintext")) {
                throw new ServiceException(host + ":" + port + " does not speak TLS: use http:// (or give the service "
                        + "--tls-cert and --tls-key)");
            }
            throw new TransientFailure("SSLException: " + err.getMessage());
        } catch (IOException err) {
            if (!https && !answered && !(err instanceof ConnectException) && speaksTls()) {
                throw new ServiceException(host + ":" + port + " speaks TLS: use https:// (with --cafile for a "
                        + "self-made certificate)");
            }
            throw new TransientFailure(err.getClass().getSimpleName() + ": " + err.getMessage());
        } finally {
            if (conn != null && !done) {      // a failed connection is not returned to the pool
                conn.disconnect();
            }
        }
    }

    private static boolean untrusted(Throwable err) {
        for (Throwable t = err; t != null; t = t.getCause()) {
            if (t instanceof CertificateException || t instanceof java.security.cert.CertPathValidatorException
                    || String.valueOf(t.getMessage()).contains("PKIX")
                    || String.valueOf(t.getMessage()).contains("No subject alternative")) {
                return true;
            }
        }
        return false;
    }

    private static String rootMessage(Throwable err) {
        Throwable t = err;
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t.getMessage();
    }

    /** Whether the service completes (or starts) a TLS handshake: an http:// address for a TLS service. */
    private boolean speaksTls() {
        try (java.net.Socket raw = new java.net.Socket()) {
            raw.connect(new InetSocketAddress(host, port), 5000);
            raw.setSoTimeout(5000);
            SSLSocket s = (SSLSocket) ((SSLSocketFactory) SSLSocketFactory.getDefault())
                    .createSocket(raw, host, port, false);
            try {
                s.startHandshake();
                return true;
            } catch (SSLHandshakeException err) {
                return untrusted(err);     // a certificate came back: the peer speaks TLS
            } finally {
                s.close();
            }
        } catch (IOException err) {
            return false;
        }
    }
}
