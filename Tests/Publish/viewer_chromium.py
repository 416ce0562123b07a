#!/usr/bin/env python3
"""Headless Chromium (Debian's `chromium`) opening a viewer page, driven over DevTools.

`--screenshot` and `--virtual-time-budget` do not wait for WebRTC, so this starts
Chromium with `--remote-debugging-port=0`, reads the port from DevToolsActivePort,
and talks the DevTools protocol over a websocket (PyPI `websockets`):
Page.navigate to the URL, poll `#state` until it reads "connected", wait a few
seconds, then read the playing <video>'s pixels (drawn into a canvas, luma
computed in the page), take a screenshot (Page.captureScreenshot) and leave
the page (about:blank), which makes the page DELETE its WHEP resource. The
report's "deletes" lists every DELETE the browser sent, its URL and the HTTP
status it got back, read from Chromium's net log (--log-net-log; DevTools does
not see the keepalive request a leaving page makes).

    viewer_chromium.py URL --out DIR [--settle S] [--timeout S] [--frames N]
                       [--video-selector CSS] [--state-selector CSS] [--fake-media] [--hold S]
                       [--watch-text CSS [--watch-until REGEX]]

--video-selector/--state-selector name the <video> to grab and the element whose
text is the connection state (default #video and #state: the viewer page; the
router's session page has one tile per stream: `.stream video`, `.stream .state`).
--fake-media gives the page Chromium's fake camera and microphone (a moving
pattern and a beep), for a page that publishes; --treat-as-secure ORIGIN lets an
http:// page have them (browsers give the camera only to secure origins). --hold S stays on the page S
seconds after the grabs (a peer subscribes to what the page publishes meanwhile);
the report then also has the page's window.sessionState. --watch-text CSS polls that
element's text every 0.2 s during the hold instead of sleeping, and ends the hold early once
the text matches --watch-until REGEX (case-insensitive): the report's "watched" has every
distinct text in order, the element's aria-live attribute and whether the text matched.

prints one JSON object: the #state values seen in order, the final state, the
page's window.viewerStats and #stats text, for each grabbed frame its size and
the test-pattern counter read from it (Tests/Device/pattern.py; null when
unreadable), the SDP answer the page received, and the paths of DIR/screenshot.png and DIR/frame-<i>.npy (luma,
uint8, height x width). Run it in the same network (namespace) as the server:
the DevTools port is on that namespace's loopback.

Chromium without media permission gathers host candidates only on the
interface of the default route: in a namespace without a default route its
offer carries no candidate at all (a peer then sees it only as peer-reflexive
from its checks). Give the namespace a default route to get a host candidate.

Flags that matter for WebRTC here: `--disable-features=WebRtcHideLocalIpsWithMdns`
(else Chromium's host candidates are `<uuid>.local` mDNS names that no peer here
can resolve), `--autoplay-policy=no-user-gesture-required` (the page's <video>
is muted autoplay anyway), `--no-sandbox` (root), `--disable-gpu`.
"""
import argparse
import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import websockets
import websockets.sync.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Device"))
from pattern import decode_counter  # noqa: E402

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--password-store=basic",
    "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
    "--remote-allow-origins=*",
    "--window-size=1000,900",
]

# The <video> drawn into a canvas; luma (BT.601) computed in the page to keep the
# transfer small; base64 of width*height bytes.
GRAB_JS = r"""
((selector) => {
  const v = document.querySelector(selector);
  if (!v || !v.videoWidth) return null;
  const c = document.createElement("canvas");
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext("2d", { willReadFrequently: true });
  g.drawImage(v, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const y = new Uint8Array(c.width * c.height);
  for (let i = 0, j = 0; i < y.length; i++, j += 4) {
    y[i] = Math.round(0.299 * d[j] + 0.587 * d[j + 1] + 0.114 * d[j + 2]);
  }
  let s = "";
  for (let i = 0; i < y.length; i += 0x8000) s += String.fromCharCode.apply(null, y.subarray(i, i + 0x8000));
  return { width: c.width, height: c.height, currentTime: v.currentTime, luma: btoa(s) };
})(%s)
"""


# Installed before the page's own script: records the answer the page receives
# (window.__answerSDP) and, for a peer that must refuse some RTP header
# extensions, strips their a=extmap lines from the page's offer, as a browser
# without them would send it.
def sdp_hooks_js(refuse_extensions):
    return """
(() => {
  const refuse = %s;
  const strip = (sdp) => sdp.split("\\r\\n")
    .filter((l) => !(l.startsWith("a=extmap:") && refuse.some((u) => l.endsWith(" " + u))))
    .join("\\r\\n");
  const createOffer = RTCPeerConnection.prototype.createOffer;
  RTCPeerConnection.prototype.createOffer = async function (...args) {
    const offer = await createOffer.apply(this, args);
    return refuse.length ? { type: offer.type, sdp: strip(offer.sdp) } : offer;
  };
  const setRemote = RTCPeerConnection.prototype.setRemoteDescription;
  RTCPeerConnection.prototype.setRemoteDescription = function (description) {
    window.__answerSDP = description && description.sdp;
    return setRemote.apply(this, arguments);
  };
})();
""" % json.dumps(list(refuse_extensions))


def netlog_events(text):
    """A Chromium net log's (constants, events). A log Chromium finalised is one JSON
    document. One it did not (killed, or cut short by SIGTERM) is the constants, then
    events one after another: those are decoded one by one up to the first that does not
    decode. CI saw such a log whose last two events were both cut short, so no rule about
    which line was cut is safe."""
    try:
        netlog = json.loads(text)
        return netlog["constants"], netlog["events"]
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()

    def after(position, token):
        while text[position] in " \t\r\n":
            position += 1
        if not text.startswith(token, position):
            raise ValueError(f"net log: expected {token!r} at {position}")
        return position + len(token)

    position = after(0, "{")
    position = after(position, '"constants"')
    position = after(position, ":")
    while text[position] in " \t\r\n":
        position += 1
    constants, position = decoder.raw_decode(text, position)
    position = after(after(after(after(position, ","), '"events"'), ":"), "[")
    events = []
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        try:
            event, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return constants, events
        if not isinstance(event, dict):
            return constants, events
        events.append(event)


def deletes_from_netlog(path):
    """The DELETE requests in a Chromium net log: [{url, status, error}] in order."""
    constants, events = netlog_events(open(path).read())
    names = {v: k for k, v in constants["logEventTypes"].items()}
    requests = {}
    for event in events:
        name, params, source = names.get(event["type"]), event.get("params", {}), event["source"]["id"]
        if name == "URL_REQUEST_START_JOB" and params.get("method") == "DELETE":
            requests[source] = {"url": params["url"], "status": None, "error": None}
        elif source in requests and name == "HTTP_TRANSACTION_READ_RESPONSE_HEADERS":
            requests[source]["status"] = int(params["headers"][0].split()[1])
        elif source in requests and params.get("net_error"):
            requests[source]["error"] = params["net_error"]
    return list(requests.values())


class Chromium:
    """One headless Chromium with its own profile directory; a context manager."""

    def __init__(self, binary=None, extra_flags=()):
        self.binary = binary or shutil.which("chromium") or shutil.which("chromium-browser")
        if not self.binary:
            raise RuntimeError("chromium not found (Debian package `chromium`)")
        self.profile = tempfile.mkdtemp(prefix="camagent-chromium-")
        self.log_path = os.path.join(self.profile, "chromium.log")
        self.extra_flags = list(extra_flags)
        self.proc = None
        self.port = None
        self.netlog = os.path.join(self.profile, "net.json")
        self.deletes = None   # read from the net log when Chromium has exited

    def __enter__(self):
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, *CHROMIUM_FLAGS, *self.extra_flags, f"--user-data-dir={self.profile}",
             f"--log-net-log={self.netlog}", "--remote-debugging-port=0", "about:blank"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        active = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited {self.proc.returncode}:\n{self.log()}")
            if os.path.exists(active):
                lines = open(active).read().split()
                if lines:
                    self.port = int(lines[0])
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"chromium gave no DevTools port in 30 s:\n{self.log()}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.close_over_devtools()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if os.path.exists(self.netlog):
            self.deletes = deletes_from_netlog(self.netlog)
        shutil.rmtree(self.profile, ignore_errors=True)

    def deletes_so_far(self):
        """deletes_from_netlog on the log as Chromium has written it up to now."""
        return deletes_from_netlog(self.netlog) if os.path.exists(self.netlog) else []

    def close_over_devtools(self):
        """Browser.close: Chromium shuts down as a user would close it, so its net log is
        finalised (a SIGTERM can leave the last events cut short). Waits up to 10 s; the
        caller terminates it if it is still running."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/version", timeout=5) as r:
                browser_url = json.load(r)["webSocketDebuggerUrl"]
            with websockets.sync.client.connect(browser_url, open_timeout=5, close_timeout=2) as ws:
                ws.send(json.dumps({"id": 1, "method": "Browser.close"}))
                self.proc.wait(timeout=10)
        except (OSError, KeyError, ValueError, subprocess.TimeoutExpired,
                websockets.exceptions.WebSocketException):
            pass   # terminate() below

    def log(self):
        try:
            return open(self.log_path).read()[-4000:]
        except OSError:
            return ""

    def page_websocket_url(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            targets = json.load(r)
        for target in targets:
            if target.get("type") == "page":
                return target["webSocketDebuggerUrl"]
        raise RuntimeError(f"no page target: {targets}")


class DevTools:
    """A minimal DevTools protocol client on one page target: commands by id, events logged."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.console = []

    async def call(self, method, params=None, timeout=30):
        self.next_id += 1
        mid = self.next_id
        await self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.time() + timeout
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), max(0.1, deadline - time.time()))
            message = json.loads(raw)
            if message.get("id") == mid:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def _event(self, message):
        method = message.get("method")
        if method == "Runtime.consoleAPICalled":
            args = message["params"].get("args", [])
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
        elif method == "Runtime.exceptionThrown":
            self.console.append("exception: " + json.dumps(message["params"]["exceptionDetails"])[:500])

    async def evaluate(self, expression, timeout=30):
        result = await self.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True}, timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")


WATCH_JS = """
((selector) => {
  const e = document.querySelector(selector);
  return e ? { text: e.textContent, ariaLive: e.getAttribute("aria-live") } : null;
})(%s)
"""


async def watch_text(dt, selector, seconds, until):
    """Polls `selector`'s text for up to `seconds`, until it matches the regex `until` (if given)."""
    watched = {"selector": selector, "values": [], "ariaLive": None, "matched": False}
    pattern = re.compile(until, re.IGNORECASE) if until else None
    deadline = time.time() + seconds
    while time.time() < deadline:
        seen = await dt.evaluate(WATCH_JS % json.dumps(selector))
        if seen is not None:
            watched["ariaLive"] = seen["ariaLive"]
            if not watched["values"] or watched["values"][-1] != seen["text"]:
                watched["values"].append(seen["text"])
            if pattern and pattern.search(seen["text"] or ""):
                watched["matched"] = True
                break
        await asyncio.sleep(0.2)
    return watched


async def view(url, out, *, connect_timeout=30.0, settle=3.0, frames=2, chromium=None, refuse_extensions=(),
               video_selector="#video", state_selector="#state", hold=0.0, watch=None, watch_until=None):
    """Opens URL in headless Chromium and reports what the viewer page shows (see module doc)."""
    state_js = ("(() => { const e = document.querySelector(%s); return e ? e.textContent : null; })()"
                % json.dumps(state_selector))
    os.makedirs(out, exist_ok=True)
    report = {"url": url, "states": [], "frames": []}
    with (chromium or Chromium()) as browser:
        async with websockets.connect(browser.page_websocket_url(), max_size=64 * 1024 * 1024) as ws:
            dt = DevTools(ws)
            await dt.call("Runtime.enable")
            await dt.call("Page.enable")
            await dt.call("Page.addScriptToEvaluateOnNewDocument", {"source": sdp_hooks_js(refuse_extensions)})
            await dt.call("Page.navigate", {"url": url})
            deadline = time.time() + connect_timeout
            state = None
            while time.time() < deadline:
                state = await dt.evaluate(state_js)
                if state is not None and (not report["states"] or report["states"][-1] != state):
                    report["states"].append(state)
                if state in ("connected", "failed"):
                    break
                await asyncio.sleep(0.2)
            if state == "connected":
                await asyncio.sleep(settle)
                for index in range(frames):
                    if index:
                        await asyncio.sleep(1.0)
                    grab = await dt.evaluate(GRAB_JS % json.dumps(video_selector))
                    if grab is None:
                        report["frames"].append(None)
                        continue
                    w, h = grab["width"], grab["height"]
                    luma = np.frombuffer(base64.b64decode(grab["luma"]), dtype=np.uint8).reshape(h, w)
                    path = os.path.join(out, f"frame-{index}.npy")
                    np.save(path, luma)
                    report["frames"].append({"width": w, "height": h, "currentTime": grab["currentTime"],
                                             "counter": decode_counter(luma), "luma": path})
            if watch:
                report["watched"] = await watch_text(dt, watch, hold, watch_until)
            elif hold > 0:
                await asyncio.sleep(hold)
            if hold > 0:
                report["session"] = await dt.evaluate("window.sessionState || null")
            report["finalState"] = await dt.evaluate(state_js)
            report["answer"] = await dt.evaluate("window.__answerSDP || null")
            report["stats"] = await dt.evaluate("window.viewerStats || null")
            report["statsText"] = await dt.evaluate(
                "(() => { const e = document.getElementById('stats'); return e ? e.innerText : null; })()")
            report["message"] = await dt.evaluate(
                "(() => { const e = document.getElementById('message'); return e ? e.textContent : null; })()")
            shot = await dt.call("Page.captureScreenshot", {"format": "png"})
            report["screenshot"] = os.path.join(out, "screenshot.png")
            with open(report["screenshot"], "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            # Leaving the page fires its pagehide handler: the WHEP resource is DELETEd.
            await dt.call("Page.navigate", {"url": "about:blank"})
            await asyncio.sleep(1.0)
            # A DELETE still unanswered would be cut off by closing Chromium: wait (up to 9 s
            # more) until the net log written so far shows each one answered or failed.
            deadline = time.time() + 9
            while time.time() < deadline and any(d["status"] is None and d["error"] is None
                                                 for d in browser.deletes_so_far()):
                await asyncio.sleep(0.25)
            report["console"] = dt.console
        report["chromiumLog"] = browser.log()[-1500:]
    report["deletes"] = browser.deletes
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("--out", required=True, help="directory for screenshot.png and frame-<i>.npy")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for 'connected'")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to play before grabbing frames")
    parser.add_argument("--frames", type=int, default=2, help="frames to grab, one second apart")
    parser.add_argument("--refuse-extension", action="append", default=[], metavar="URI",
                        help="strip this RTP header extension from the page's offer (repeatable)")
    parser.add_argument("--video-selector", default="#video", help="CSS selector of the <video> to grab")
    parser.add_argument("--state-selector", default="#state", help="CSS selector of the connection state's element")
    parser.add_argument("--fake-media", action="store_true", help="Chromium's fake camera and microphone")
    parser.add_argument("--treat-as-secure", metavar="ORIGIN",
                        help="an http:// origin Chromium treats as secure (camera access needs a secure origin)")
    parser.add_argument("--trust-spki", metavar="PIN",
                        help="accept a server certificate whose public key has this pin (base64 SHA-256 of its "
                             "SubjectPublicKeyInfo): a self-signed https:// origin, which stays a secure origin")
    parser.add_argument("--hold", type=float, default=0.0, help="seconds to stay on the page after the grabs")
    parser.add_argument("--watch-text", metavar="CSS", help="during the hold, record this element's text")
    parser.add_argument("--watch-until", metavar="REGEX", help="end the hold once the watched text matches")
    args = parser.parse_args(argv)
    flags = ["--use-fake-device-for-media-stream"] if args.fake_media else []
    if args.treat_as_secure:
        flags.append(f"--unsafely-treat-insecure-origin-as-secure={args.treat_as_secure}")
    if args.trust_spki:
        flags.append(f"--ignore-certificate-errors-spki-list={args.trust_spki}")
    chromium = Chromium(extra_flags=flags)
    report = asyncio.run(view(args.url, args.out, connect_timeout=args.timeout, settle=args.settle,
                              frames=args.frames, chromium=chromium, refuse_extensions=args.refuse_extension,
                              video_selector=args.video_selector, state_selector=args.state_selector,
                              hold=args.hold, watch=args.watch_text, watch_until=args.watch_until))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
