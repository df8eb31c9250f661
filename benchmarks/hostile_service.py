"""A bounded hostile load on `pategail serve` over loopback: does the service keep serving, with bounded
memory, descriptors and log?

Starts `pategail serve` (admission by issued tokens, a tiny configuration, waiting for devices), measures its
RSS, open descriptors and train.log size, then, for at most --seconds: slowloris connections (a
Content-Length body that never arrives, and headers that never end), squatters enrolling fresh keys without
a token or with a guessed one, unsigned and garbage requests from --threads threads, and oversized bodies;
meanwhile GET /status is timed from another loopback address (127.0.0.2: the service limits per address,
and the hostile one spends its budget). The slow connections are held until the service's idle timeout has
passed, to see that it closed them. Afterwards: the same figures, whether every squatter was refused, whether a
device with an issued token still enrols, and the service's own counters.

Run: .venv/bin/python benchmarks/hostile_service.py --data DIR --out /tmp/hostile [--seconds 60] [--addresses 16]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import rss_mib

TINY = {"days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}, "rounds": 1}


def _figures(pid: int, run: Path) -> dict:
    return {"rss_mib": round(rss_mib(pid)[0], 1), "open_fds": len(os.listdir(f"/proc/{pid}/fd")),
            "log_bytes": sum(p.stat().st_size for p in run.glob("train.log*"))}


def _request(port: int, method: str, path: str, body: bytes = b"", headers=None, source: str = "127.0.0.1") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        r.read()
        return r.status
    except (OSError, http.client.HTTPException):
        return -1
    finally:
        conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seconds", type=float, default=60.0, help="upper bound of the hostile phase")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--requests", type=int, default=3000, help="garbage/unsigned requests in all")
    p.add_argument("--squatters", type=int, default=1000)
    p.add_argument("--slow", type=int, default=200, help="slowloris connections (half bodies, half headers)")
    p.add_argument("--addresses", type=int, default=1,
                   help="loopback source addresses the hostile threads spread over (127.0.1.1, ...): the service's "
                        "per-address budget applies to each")
    p.add_argument("--hold", type=float, default=65.0,
                   help="seconds after opening them to check that the service closed the slow connections "
                        "(its idle timeout is 60 s, its body timeout 30 s)")
    args = p.parse_args()
    from pategail.sdk.net.frames import ANY_ID, Enrolment
    from pategail.sdk.secagg.config import DevicePublicKeys
    from pategail.sdk.secagg.crypto import DeviceIdentity

    args.out.mkdir(parents=True, exist_ok=True)
    config = args.out / "tiny.json"
    config.write_text(json.dumps(TINY))
    run = args.out / "run"
    serve = subprocess.Popen([sys.executable, "-m", "pategail", "serve", "--data", str(args.data), "--out", str(run),
                              "--no-privacy", "--config", str(config), "--port", "0", "--min-devices", "2",
                              "--no-downstream", "--no-progress"], stdout=open(args.out / "serve.log", "wb"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    result: dict = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        while not (run / "service.url").is_file():
            if serve.poll() is not None:
                raise SystemExit((args.out / "serve.log").read_text()[-2000:])
            time.sleep(0.2)
        port = int((run / "service.url").read_text().strip().rsplit(":", 1)[1])
        time.sleep(1.0)
        result["before"] = _figures(serve.pid, run)
        end = time.monotonic() + args.seconds
        status_ms: list[float] = []
        codes: dict[str, dict[int, int]] = {}
        lock = threading.Lock()

        def count(kind: str, code: int) -> None:
            with lock:
                codes.setdefault(kind, {}).setdefault(code, 0)
                codes[kind][code] = codes[kind].get(code, 0) + 1

        slow = []
        slow_opened = time.monotonic()
        for i in range(args.slow):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"POST /v1/enrol HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789" if i % 2
                          else b"POST /v1/enrol HTTP/1.1\r\nHost: x\r\n")
                slow.append(s)
            except OSError:
                count("slowloris connect", -1)

        def source(k: int) -> str:
            return f"127.0.1.{k % args.addresses + 1}"

        def squat(n: int, me: int) -> None:
            for k in range(n):
                if time.monotonic() > end:
                    return
                identity = DeviceIdentity.generate()
                body = Enrolment(DevicePublicKeys(identity.signing_public, identity.envelope_public),
                                 ANY_ID).to_bytes(identity.sign)
                count("squatter", _request(port, "POST", "/v1/enrol", body,
                                           {"X-Pategail-Enrol-Token": "guess"} if k % 2 else None, source(me)))

        def garbage(n: int, me: int) -> None:
            kinds = [("GET", "/v1/poll?wait=0", b"", {}), ("POST", "/v1/reply", b"\x00garbage", {}),
                     ("POST", "/v1/enrol", b"not a frame", {}), ("GET", "/v1/directory", b"",
                                                                  {"X-Pategail-Device": "7", "X-Pategail-Nonce": "1",
                                                                   "X-Pategail-Signature": "00" * 64}),
                     ("GET", "/v1/bundle/..%2F..%2Fetc%2Fpasswd", b"", {}), ("GET", "/metrics", b"", {})]
            for k in range(n):
                if time.monotonic() > end:
                    return
                method, path, body, headers = kinds[k % len(kinds)]
                count("garbage", _request(port, method, path, body, headers, source(me)))

        def oversized() -> None:
            for _ in range(5):
                count("50 MB body", _request(port, "POST", "/v1/enrol", bytes(50 << 20)))

        def watch() -> None:
            while time.monotonic() < end and any(t.is_alive() for t in workers):
                t0 = time.perf_counter()
                code = _request(port, "GET", "/status", source="127.0.0.2")
                status_ms.append(1e3 * (time.perf_counter() - t0) if code == 200 else float("inf"))
                time.sleep(0.2)

        per = max(1, args.requests // args.threads)
        half = max(1, args.threads // 2)
        workers = ([threading.Thread(target=garbage, args=(per, i)) for i in range(half)]
                   + [threading.Thread(target=squat, args=(max(1, args.squatters // half), half + i))
                      for i in range(half)] + [threading.Thread(target=oversized)])
        t0 = time.monotonic()
        for w in workers:
            w.start()
        watcher = threading.Thread(target=watch)
        watcher.start()
        for w in workers:
            w.join()
        watcher.join()
        result["hostile_s"] = round(time.monotonic() - t0, 1)
        result["during"] = _figures(serve.pid, run)
        time.sleep(max(0.0, slow_opened + args.hold - time.monotonic()))
        closed = 0
        for s in slow:
            s.settimeout(0.05)
            try:
                while s.recv(4096):                   # a 408, then the end
                    pass
                closed += 1
            except socket.timeout:
                pass
            except OSError:
                closed += 1
            s.close()
        result["slowloris_closed_by_service"] = f"{closed} of {len(slow)} after {args.hold:g} s"
        time.sleep(1.0)
        result["after"] = _figures(serve.pid, run)
        result["codes"] = {k: dict(sorted(v.items())) for k, v in codes.items()}
        finite = sorted(v for v in status_ms if v != float("inf"))
        result["status_during"] = {"n": len(status_ms), "failed": len(status_ms) - len(finite),
                                   "p50_ms": round(finite[len(finite) // 2], 1) if finite else None,
                                   "max_ms": round(finite[-1], 1) if finite else None}
        token = (run / "enrol-tokens.txt").read_text().split()[0]
        identity = DeviceIdentity.generate()
        body = Enrolment(DevicePublicKeys(identity.signing_public, identity.envelope_public),
                         ANY_ID).to_bytes(identity.sign)
        result["device_with_token_enrols"] = _request(port, "POST", "/v1/enrol", body,
                                                      {"X-Pategail-Enrol-Token": token}, source="127.0.0.2") == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.2", 0))
        conn.request("GET", "/status")
        status = json.loads(conn.getresponse().read())
        result["service_status"] = {k: status[k] for k in ("devices_enrolled", "requests_refused")}
        roster = json.loads((run / "roster.json").read_text())
        result["roster_devices"] = len(roster["devices"])
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    print(json.dumps(result, indent=1))
    (args.out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
