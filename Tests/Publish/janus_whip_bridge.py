#!/usr/bin/env python3
"""A test-only WHIP front for a Janus VideoRoom, over Janus's plain HTTP API.

    janus_whip_bridge.py --janus http://10.77.0.1:8088/janus --room 1234
                         [--host 0.0.0.0] [--port 0] [--token T]

The first line on stdout is the bound TCP port.
    POST <any path>         offer (application/sdp): create a Janus session, attach
                            janus.plugin.videoroom, join ROOM as a publisher, then
                            `configure` with the offer as JSEP; Janus's JSEP answer
                            comes back as 201 + Location /resource/<id>
    DELETE /resource/<id>   unpublish, leave, detach, destroy -> 200 (unknown -> 404)
    GET /summary            the resources: Janus session, handle, publisher id, events

Janus's HTTP API is asynchronous: requests with a plugin message are
acknowledged ("ack") and the result comes as an event on the session's long
poll (GET /janus/<session>). One long poll runs per session; it also keeps the
session alive (Janus drops sessions idle for session_timeout).

write_config(DIR, ...) writes a Janus configuration folder for `janus -F DIR`:
the HTTP transport and the VideoRoom plugin only, ICE on one address.
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import uuid

import aiohttp
from aiohttp import web

log = logging.getLogger("janus-bridge")

JANUS_LIB = "/usr/lib/x86_64-linux-gnu/janus"
OTHER_PLUGINS = ["audiobridge", "duktape", "echotest", "lua", "nosip", "recordplay", "sip", "streaming",
                 "textroom", "videocall", "voicemail"]
OTHER_TRANSPORTS = ["mqtt", "nanomsg", "pfunix", "rabbitmq", "websockets"]
EVENT_HANDLERS = ["gelfevh", "mqttevh", "nanomsgevh", "rabbitmqevh", "sampleevh", "wsevh"]


def write_config(folder, *, ice_address, http_port, room=1234, videocodec="vp8,h264", lib=JANUS_LIB, ice_lite=False):
    """Writes janus.jcfg, janus.transport.http.jcfg and janus.plugin.videoroom.jcfg into folder.

    ice_lite=True makes Janus an ICE-lite server (as many SFUs are): the
    publisher must then be the controlling agent and nominate on its own."""
    os.makedirs(folder, exist_ok=True)
    disable = lambda kind, names, suffix="": ",".join(f"libjanus_{n}{suffix}.so" for n in names)  # noqa: E731
    with open(os.path.join(folder, "janus.jcfg"), "w") as f:
        f.write(f"""general: {{
    configs_folder = "{folder}"
    plugins_folder = "{lib}/plugins"
    transports_folder = "{lib}/transports"
    events_folder = "{lib}/events"
    loggers_folder = "{lib}/loggers"
    debug_level = 4
    session_timeout = 60
    interface = "{ice_address}"
}}
certificates: {{
}}
media: {{
    ipv6 = false
    rtp_port_range = "20000-40000"
}}
nat: {{
    nice_debug = false
    ice_enforce_list = "{ice_address}"
    ignore_mdns = true
    ice_lite = {"true" if ice_lite else "false"}
}}
plugins: {{
    disable = "{disable('plugins', OTHER_PLUGINS)}"
}}
transports: {{
    disable = "{disable('transports', OTHER_TRANSPORTS)}"
}}
loggers: {{
    disable = "libjanus_jsonlog.so"
}}
events: {{
    broadcast = false
    disable = "{disable('events', EVENT_HANDLERS)}"
}}
""")
    with open(os.path.join(folder, "janus.transport.http.jcfg"), "w") as f:
        f.write(f"""general: {{
    json = "compact"
    base_path = "/janus"
    http = true
    port = {http_port}
    https = false
}}
admin: {{
    admin_http = false
    admin_https = false
}}
cors: {{
}}
""")
    with open(os.path.join(folder, "janus.plugin.videoroom.jcfg"), "w") as f:
        f.write(f"""general: {{
}}
room-{room}: {{
    description = "camagent tests"
    publishers = 6
    bitrate = 0
    fir_freq = 10
    audiocodec = "opus"
    videocodec = "{videocodec}"
    record = false
}}
""")


class JanusError(Exception):
    pass


class JanusSession:
    """A Janus session with one videoroom handle, over the HTTP API, with its long poll."""

    def __init__(self, http, base):
        self.http = http
        self.base = base.rstrip("/")
        self.session = None
        self.handle = None
        self.events = asyncio.Queue()
        self.seen = []
        self.poll_task = None

    async def request(self, path, body):
        body = dict(body, transaction=uuid.uuid4().hex[:12])
        async with self.http.post(self.base + path, json=body) as r:
            data = await r.json(content_type=None)
        if data.get("janus") == "error":
            raise JanusError(data.get("error"))
        return data

    async def open(self):
        data = await self.request("", {"janus": "create"})
        self.session = data["data"]["id"]
        self.poll_task = asyncio.ensure_future(self._poll())
        data = await self.request(f"/{self.session}", {"janus": "attach", "plugin": "janus.plugin.videoroom"})
        self.handle = data["data"]["id"]

    async def _poll(self):
        while True:
            try:
                async with self.http.get(f"{self.base}/{self.session}?maxev=5",
                                         timeout=aiohttp.ClientTimeout(total=40)) as r:
                    data = await r.json(content_type=None)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("long poll: %r", e)
                await asyncio.sleep(0.5)
                continue
            for event in data if isinstance(data, list) else [data]:
                if event.get("janus") == "keepalive":
                    continue
                self.seen.append(event)
                await self.events.put(event)

    async def message(self, body, jsep=None, timeout=30):
        """Sends a plugin message; returns (plugin data, jsep) of its result, sync or async."""
        req = {"janus": "message", "body": body}
        if jsep:
            req["jsep"] = jsep
        data = await self.request(f"/{self.session}/{self.handle}", req)
        if data.get("janus") == "success":
            return data.get("plugindata", {}).get("data", {}), data.get("jsep")
        transaction = data.get("transaction")

        async def wait():  # "ack" now, the result later on the long poll, same transaction
            while True:
                event = await self.events.get()
                if event.get("transaction") == transaction and "plugindata" in event:
                    return event["plugindata"].get("data", {}), event.get("jsep")
        result, answer = await asyncio.wait_for(wait(), timeout)
        if "error" in result:
            raise JanusError(f"{result.get('error_code')}: {result['error']}")
        return result, answer

    async def trickle_done(self):
        await self.request(f"/{self.session}/{self.handle}", {"janus": "trickle", "candidate": {"completed": True}})

    async def close(self):
        try:
            if self.handle:
                await self.request(f"/{self.session}/{self.handle}", {"janus": "detach"})
            if self.session:
                await self.request(f"/{self.session}", {"janus": "destroy"})
        except Exception as e:
            log.warning("close: %r", e)
        if self.poll_task:
            self.poll_task.cancel()


class Bridge:
    def __init__(self, janus, room, token=None):
        self.janus = janus
        self.room = room
        self.token = token
        self.resources = {}
        self.requests = []
        self.http = None

    def app(self):
        app = web.Application()
        app.router.add_get("/summary", self.handle_summary)
        app.router.add_delete("/resource/{id}", self.handle_delete)
        app.router.add_post("/{tail:.*}", self.handle_post)
        return app

    async def handle_post(self, request):
        if self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
            self.requests.append({"method": "POST", "status": 401})
            return web.Response(status=401, text="unauthorized\n")
        offer = await request.text()
        js = JanusSession(self.http, self.janus)
        rid = uuid.uuid4().hex[:12]
        try:
            await js.open()
            joined, _ = await js.message({"request": "join", "ptype": "publisher", "room": self.room,
                                          "display": f"whip-{rid}"})
            result, answer = await js.message({"request": "configure", "audio": True, "video": True},
                                              jsep={"type": "offer", "sdp": offer})
            if answer is None:
                raise JanusError(f"no JSEP answer: {result}")
            await js.trickle_done()
        except Exception as e:
            log.warning("publish failed: %r", e)
            await js.close()
            self.requests.append({"method": "POST", "status": 502, "error": str(e)})
            return web.Response(status=502, text=f"janus: {e}\n")
        self.resources[rid] = {"janus": js, "publisher": joined.get("id"), "offer": offer,
                               "answer": answer["sdp"], "deleted": False}
        self.requests.append({"method": "POST", "status": 201, "resource": rid})
        log.info("resource %s: publisher %s in room %s", rid, joined.get("id"), self.room)
        return web.Response(status=201, body=answer["sdp"].encode(),
                            headers={"Content-Type": "application/sdp", "Location": f"/resource/{rid}"})

    async def handle_delete(self, request):
        res = self.resources.get(request.match_info["id"])
        if res is None or res["deleted"]:
            self.requests.append({"method": "DELETE", "status": 404})
            return web.Response(status=404)
        res["deleted"] = True
        js = res["janus"]
        try:
            await js.message({"request": "leave"}, timeout=10)
        except Exception as e:
            log.warning("leave: %r", e)
        await js.close()
        self.requests.append({"method": "DELETE", "status": 200, "resource": request.match_info["id"]})
        return web.Response(status=200)

    def summary(self):
        return {
            "room": self.room,
            "requests": self.requests,
            "resources": [{"id": rid, "publisher": r["publisher"], "deleted": r["deleted"],
                           "session": r["janus"].session, "handle": r["janus"].handle,
                           "offer": r["offer"], "answer": r["answer"],
                           "events": r["janus"].seen[-20:]}
                          for rid, r in self.resources.items()],
        }

    async def handle_summary(self, request):
        return web.json_response(self.summary())


async def serve(args):
    bridge = Bridge(args.janus, args.room, args.token)
    bridge.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    runner = web.AppRunner(bridge.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(bridge.summary(), f, indent=1)
    for res in bridge.resources.values():
        if not res["deleted"]:
            await res["janus"].close()
    await bridge.http.close()
    await runner.cleanup()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--janus", required=True, help="Janus HTTP API base, e.g. http://10.77.0.1:8088/janus")
    p.add_argument("--room", type=int, default=1234)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token")
    p.add_argument("--summary", metavar="FILE")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
