#!/usr/bin/env python3
"""Sends N WHEP offers to one endpoint at the same moment and reports each answer's status.

    whep_burst.py WHEP_URL --count N [--token T]

The offers are real: aiortc RTCPeerConnections, each receiving video and audio,
with their ICE candidates gathered before the burst, so the only thing that
differs between them is the order in which the server takes them. All requests
are released together from N threads behind a barrier. Every created resource
is DELETEd afterwards. Prints one JSON object: {"statuses": [...], "bodies": [...]}.
Fails (exit 1) when a request does not complete (connection error, timeout).
"""
import argparse
import asyncio
import json
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

from aiortc import RTCPeerConnection


async def make_offers(count):
    pcs, offers = [], []
    for _ in range(count):
        pc = RTCPeerConnection()
        pc.addTransceiver("video", direction="recvonly")
        pc.addTransceiver("audio", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        pcs.append(pc)
        offers.append(pc.localDescription.sdp)
    return pcs, offers


def post(url, token, body, barrier, out, index):
    headers = {"Content-Type": "application/sdp"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    barrier.wait(timeout=30)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            out[index] = (response.status, response.headers.get("Location"), "")
    except urllib.error.HTTPError as e:
        out[index] = (e.code, None, e.read().decode(errors="replace")[:200])
    except Exception as e:  # noqa: BLE001 - reported as a failure below
        out[index] = (None, None, f"{type(e).__name__}: {e}")


def delete(base, location, token):
    url = urllib.parse.urljoin(base, location)
    request = urllib.request.Request(url, method="DELETE",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=30):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--token")
    args = parser.parse_args()
    pcs, offers = asyncio.run(make_offers(args.count))
    results = [None] * args.count
    barrier = threading.Barrier(args.count)
    threads = [threading.Thread(target=post, args=(args.url, args.token, offers[i], barrier, results, i))
               for i in range(args.count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    failed = [r for r in results if r is None or r[0] is None]
    for status, location, _ in results:
        if status == 201 and location:
            delete(args.url, location, args.token)
    print(json.dumps({"statuses": [r[0] if r else None for r in results],
                      "bodies": [r[2] if r else "no result" for r in results]}))
    if failed:
        print(f"{len(failed)} request(s) did not complete: {failed}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
