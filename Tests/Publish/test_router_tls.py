"""`camagent router` over HTTPS: browsers give a page the camera and microphone only on a
secure origin, so a session page opened from another machine needs the router on TLS.

Checked with clients nobody here wrote (Python's ssl module with certificate and host-name
checks, the `websockets` package, the `cryptography` package reading the certificate) and
with camagent's own clients: `--tls-self-signed` makes a certificate on the first start,
keeps its key private (0600), prints a fingerprint and a public key pin that match the
certificate, names the listen address, and is used again on the next start; REST, wss
signalling, WHIP and WHEP all work through it; `--tls-cert`/`--tls-key` serve a
certificate made by the openssl tool; and bad TLS input gets a clear error and exit code.
"""
import asyncio
import base64
import hashlib
import ipaddress
import json
import os
import re
import ssl
import subprocess

import websockets
from cryptography import x509
from cryptography.hazmat.primitives import serialization

import numpy as np

from pattern import decode_counter
from publish_support import BIN
from router_support import ROUTER_PORT, WAIT, Router, http, in_namespace
from test_router_page import open_session_page, wait_for_page_stream
from test_subscribe import check_pattern_y4m, start_publisher
from viewer_checks import chromium_or_fail

EXIT_USAGE = 64
EXIT_SECRET_OR_TLS_FILE = 78


def certificate_digests(path):
    """(fingerprint as AA:BB:…, base64 SHA-256 of the SubjectPublicKeyInfo, the certificate)."""
    with open(path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    der = cert.public_bytes(serialization.Encoding.DER)
    fingerprint = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return fingerprint, base64.b64encode(hashlib.sha256(spki).digest()).decode(), cert


def tls_line(router):
    lines = [l.strip() for l in router.lines if l.startswith("tls:")]
    assert len(lines) == 1, router.lines
    return lines[0]


def test_self_signed_router_serves_rest_signalling_and_media_over_tls(net, workdir):
    router = Router(net, workdir, "--tls-self-signed")
    assert router.listen_line.startswith(f"router: listening on https://{net.addr}:{ROUTER_PORT}"), router.listen_line
    crt, key = os.path.join(workdir, "router-tls.crt"), os.path.join(workdir, "router-tls.key")
    assert os.stat(key).st_mode & 0o777 == 0o600, oct(os.stat(key).st_mode)

    # What it prints is what the certificate is.
    fingerprint, pin, cert = certificate_digests(crt)
    line = tls_line(router)
    assert f"created {crt}" in line and f"SHA-256 fingerprint {fingerprint}" in line, (line, fingerprint)
    assert f"public key pin {pin}" in line, (line, pin)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address(net.addr) in names.get_values_for_type(x509.IPAddress), names
    assert "localhost" in names.get_values_for_type(x509.DNSName), names

    # REST, checked against the certificate and the address (ssl's default context does both).
    session = router.create_session()
    status, _, streams = http(net, "GET", f"{router.session_url(session)}/streams", token=router.project_token(),
                              context=router.context)
    assert (status, streams) == (200, []), (status, streams)

    # Signalling over wss.
    async def connected():
        url = router.connect_url(session, router.token(session, "subscriber"))
        async with websockets.connect(url, ssl=router.context, open_timeout=WAIT) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), WAIT))
    message = in_namespace(net, connected)
    assert message["type"] == "connected" and message["mediaMode"] == "routed", message

    # Media: camagent publishes over https WHIP and subscribes over https WHEP and wss.
    url = router.session_url(session)
    start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                    *router.client_flags(), duration=30)
    router.wait_for_streams(session, 1)
    y4m = os.path.join(workdir, "tls.y4m")
    proc = net.run([BIN, "subscribe", "--session", url, "--token", router.token(session, "subscriber"),
                    *router.client_flags(), "--first", "--video-out", y4m, "--duration", "6", "--json"], timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:] + router.log()
    check_pattern_y4m(y4m, fps=15, seconds=4, size=(640, 480))


def test_a_client_that_does_not_trust_the_certificate_is_refused_and_plain_http_gets_nothing(net, workdir):
    router = Router(net, workdir, "--tls-self-signed")
    proc = router.cli("session", "create", "--router", router.base, "--secret-file", router.secret, check=False)
    assert proc.returncode != 0 and "certificate" in proc.stderr, (proc.returncode, proc.stderr)

    def plain_http():
        try:
            status, _, body = http(net, "GET", f"http://{net.addr}:{ROUTER_PORT}/metrics")
            return f"answered {status}: {body!r:.200}"
        except Exception:   # the TLS server closes on a plaintext request: no HTTP answer
            return None
    assert plain_http() is None
    # The router goes on serving TLS clients after both.
    assert router.create_session()


def test_the_self_signed_certificate_is_kept_across_restarts(net, workdir):
    first = Router(net, workdir, "--tls-self-signed")
    fingerprint = re.search(r"SHA-256 fingerprint (\S+),", tls_line(first)).group(1)
    first.proc.terminate()
    first.proc.wait(timeout=30)
    second = Router(net, workdir, "--tls-self-signed")
    line = tls_line(second)
    assert "created" not in line and f"SHA-256 fingerprint {fingerprint}," in line, (line, fingerprint)


def test_a_certificate_and_key_of_ones_own(net, workdir):
    # A certificate made by the openssl tool, for the namespace's address.
    crt, key = os.path.join(workdir, "own.crt"), os.path.join(workdir, "own.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=camagent test", "-addext", f"subjectAltName=IP:{net.addr}"],
                   check=True, capture_output=True, timeout=60)
    router = Router(net, workdir, "--tls-cert", crt, "--tls-key", key)
    fingerprint, _, _ = certificate_digests(crt)
    assert tls_line(router) == f"tls: {crt}, SHA-256 fingerprint {fingerprint}", tls_line(router)
    context = ssl.create_default_context(cafile=crt)
    status, _, body = http(net, "GET", f"{router.base}/metrics", context=context)
    assert status == 200 and "camagent_router_sessions" in body, (status, body[:300])
    session = router.cli("session", "create", "--router", router.base, "--secret-file", router.secret,
                         "--tls-ca", crt).stdout.strip()
    assert session


def test_bad_tls_input_gets_a_clear_error_and_exit_code(net, workdir):
    secret = os.path.join(workdir, "router.secret")
    listen = f"{net.addr}:{ROUTER_PORT}"

    def router(*flags):
        return net.run([BIN, "router", "--listen", listen, "--secret-file", secret, *flags], timeout=60)

    only_cert = router("--tls-cert", "/nonexistent.crt")
    assert only_cert.returncode == EXIT_USAGE and "--tls-cert and --tls-key go together" in only_cert.stderr, \
        (only_cert.returncode, only_cert.stderr)
    both = router("--tls-self-signed", "--tls-cert", "a", "--tls-key", "b")
    assert both.returncode == EXIT_USAGE, (both.returncode, both.stderr)

    missing = router("--tls-cert", os.path.join(workdir, "none.crt"), "--tls-key", os.path.join(workdir, "none.key"))
    assert missing.returncode == EXIT_SECRET_OR_TLS_FILE, (missing.returncode, missing.stderr)
    assert "cannot read the TLS certificate" in missing.stderr and "No such file" in missing.stderr, missing.stderr

    garbage_crt, garbage_key = os.path.join(workdir, "garbage.crt"), os.path.join(workdir, "garbage.key")
    for path in (garbage_crt, garbage_key):
        with open(path, "w") as f:
            f.write("not a PEM file\n")
    garbage = router("--tls-cert", garbage_crt, "--tls-key", garbage_key)
    assert garbage.returncode == EXIT_SECRET_OR_TLS_FILE, (garbage.returncode, garbage.stderr)
    assert f"cannot use {garbage_crt} and {garbage_key} for TLS" in garbage.stderr, garbage.stderr

    # A key left alone (its certificate removed) is never overwritten.
    lone_key = os.path.join(workdir, "router-tls.key")
    with open(lone_key, "w") as f:
        f.write("someone's key\n")
    lone = router("--tls-self-signed")
    assert lone.returncode == EXIT_SECRET_OR_TLS_FILE and "router-tls.crt does not" in lone.stderr, \
        (lone.returncode, lone.stderr)
    assert open(lone_key).read() == "someone's key\n"

    # A client's --tls-ca that cannot be read, or holds no certificate, is this machine's
    # problem (78), said before any connection, not an unreachable router (80).
    url = f"https://{net.addr}:1/v2/sessions/x"
    for ca, words in ((os.path.join(workdir, "no-such-ca.pem"), "cannot be read"), (garbage_crt, "no PEM certificate")):
        for argv in (["session", "create", "--router", f"https://{net.addr}:1", "--secret-file", secret],
                     ["subscribe", "--session", url, "--token", "t"],
                     ["publish", "--device", "test-pattern", "--session", url, "--token", "t"]):
            proc = net.run([BIN, *argv, "--tls-ca", ca], timeout=60)
            assert proc.returncode == EXIT_SECRET_OR_TLS_FILE and f"--tls-ca {ca}: {words}" in proc.stderr, \
                (argv, proc.returncode, proc.stderr)


def test_chromium_uses_its_camera_on_the_https_session_page(net, workdir):
    """The reason for TLS: on https the page is a secure origin, so Chromium (trusting only the
    router's public key, and with no insecure-origin exception) publishes its fake camera from
    it, and plays camagent's stream."""
    chromium_or_fail()
    router = Router(net, workdir, "--tls-self-signed")
    _, pin, _ = certificate_digests(router.tls_ca)
    session = router.create_session()
    url = router.session_url(session)
    start_publisher(net, workdir, "--session", url, "--token", router.token(session, "publisher"),
                    *router.client_flags(), duration=60)
    camagent_stream = router.wait_for_streams(session, 1)[0]
    browser = open_session_page(net, workdir, router, session, "--trust-spki", pin, hold=6)
    wait_for_page_stream(router, session, browser, besides=camagent_stream)
    browser.wait(timeout=150)
    stdout = browser.stdout.read()
    assert browser.returncode == 0, f"viewer_chromium.py exit {browser.returncode}:\n" \
        + open(browser.log_path).read()[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    brief = {k: v for k, v in report.items() if k not in ("chromiumLog", "answer")}
    assert report["states"][-1] == "connected", json.dumps(brief, indent=1)
    counters = [decode_counter(np.load(f["luma"])) for f in report["frames"]]
    assert len(counters) == 2 and None not in counters and counters[1] > counters[0], counters
    assert report["session"]["publishing"]["state"] == "connected", report["session"]
