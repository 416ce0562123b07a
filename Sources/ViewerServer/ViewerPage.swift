// The viewer page served at GET /. One self-contained HTML file: no external
// scripts, styles or fonts, so it works on a LAN without internet.
//
// This raw string is the only copy of the page. Tests/Publish/viewer_page.py
// reads it out of this file (everything between the `#"""` line and the
// closing `"""#` line) to serve the same page from the aiortc stand-in, so keep
// the string raw and free of `\#` interpolations.
//
// What the page does (WHEP, RFC 9725 style, without trickle ICE):
// - one RTCPeerConnection with recvonly video and audio transceivers;
// - waits for ICE gathering to complete, POSTs the offer (application/sdp) to
//   ./whep with `Authorization: Bearer <token>` (the token from ?token= in the
//   page's URL), applies the 201's answer, remembers the Location;
// - plays the tracks in a muted autoplay <video> (browsers allow muted
//   autoplay only), with a mute/unmute button;
// - #state holds exactly the RTCPeerConnection's connectionState
//   ("new", "connecting", "connected", "disconnected", "failed", "closed");
// - #stats shows, every second, from getStats(): video frames decoded,
//   frames per second, bitrate, packets lost, jitter, resolution, codec;
//   audio bytes, packets lost, jitter; the round-trip time. The same numbers
//   are in `window.viewerStats` for scripts and tests;
// - #message says what went wrong (no token, refused, server gone);
// - on `failed` it tries again with a new offer after a pause; on leaving
//   the page it DELETEs the WHEP resource.

let viewerPageHTML = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>camagent</title>
<link rel="icon" href="data:,">
<style>
  :root { color-scheme: dark; }
  * { box-sizing: border-box; }
  body { margin: 0; background: #111; color: #ddd; font: 15px/1.4 system-ui, sans-serif; }
  main { max-width: 960px; margin: 0 auto; padding: 8px; }
  video { display: block; width: 100%; max-height: 80vh; aspect-ratio: 16 / 9; background: #000; object-fit: contain; }
  .bar { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 16px; margin: 8px 0; }
  button { font: inherit; padding: 6px 14px; border: 1px solid #555; border-radius: 4px; background: #2a2a2a; color: #eee; }
  #state { font-weight: 600; }
  #state[data-state="connected"] { color: #6c6; }
  #state[data-state="failed"], #state[data-state="disconnected"] { color: #e66; }
  #message { color: #e96; }
  #message:empty { display: none; }
  #stats { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0;
           font: 13px/1.4 ui-monospace, monospace; }
  #stats dt { color: #999; }
  #stats dd { margin: 0; }
</style>
</head>
<body>
<main>
  <video id="video" autoplay muted playsinline></video>
  <div class="bar">
    <button id="mute" type="button">Unmute</button>
    <span>Connection: <span id="state" data-state="new">new</span></span>
  </div>
  <p id="message"></p>
  <dl id="stats"></dl>
</main>
<script>
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token");
  const endpoint = new URL("whep", location.href).href;
  const video = document.getElementById("video");
  const muteButton = document.getElementById("mute");
  const stateEl = document.getElementById("state");
  const messageEl = document.getElementById("message");
  const statsEl = document.getElementById("stats");

  let pc = null;
  let resource = null;      // URL of this viewer's WHEP resource
  let retryTimer = null;
  let retryDelay = 2000;
  let previous = null;      // last getStats sample, for rates
  window.viewerStats = {};

  function authHeaders(extra) {
    const headers = Object.assign({}, extra);
    if (token) headers["Authorization"] = "Bearer " + token;
    return headers;
  }

  function setState(state) {
    stateEl.textContent = state;
    stateEl.dataset.state = state;
  }

  function say(text) { messageEl.textContent = text || ""; }

  muteButton.addEventListener("click", () => {
    video.muted = !video.muted;
    muteButton.textContent = video.muted ? "Unmute" : "Mute";
    if (!video.muted) video.play().catch(() => {});
  });

  // The box takes the stream's shape once its size is known.
  video.addEventListener("resize", () => {
    if (video.videoWidth) video.style.aspectRatio = video.videoWidth + " / " + video.videoHeight;
  });

  function gatheringComplete(connection, limitMs) {
    if (connection.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        connection.removeEventListener("icegatheringstatechange", check);
        clearTimeout(timer);
        resolve();
      };
      const check = () => { if (connection.iceGatheringState === "complete") done(); };
      const timer = setTimeout(done, limitMs); // go on with the candidates we have
      connection.addEventListener("icegatheringstatechange", check);
    });
  }

  function deleteResource(keepalive) {
    if (!resource) return;
    const url = resource;
    resource = null;
    fetch(url, { method: "DELETE", headers: authHeaders(), keepalive: keepalive }).catch(() => {});
  }

  function scheduleRetry() {
    if (retryTimer) return;
    retryTimer = setTimeout(() => { retryTimer = null; connect(); }, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 15000);
  }

  async function connect() {
    if (pc) pc.close();
    deleteResource(false);
    previous = null;
    const connection = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
    pc = connection;
    setState(connection.connectionState);
    const stream = new MediaStream();
    video.srcObject = stream;
    connection.addTransceiver("video", { direction: "recvonly" });
    connection.addTransceiver("audio", { direction: "recvonly" });
    connection.addEventListener("track", (event) => {
      stream.addTrack(event.track);
      video.play().catch(() => {});
    });
    connection.addEventListener("connectionstatechange", () => {
      if (connection !== pc) return;
      setState(connection.connectionState);
      if (connection.connectionState === "connected") { say(""); retryDelay = 2000; }
      if (connection.connectionState === "failed") {
        say("Connection lost; trying again.");
        scheduleRetry();
      }
    });

    try {
      await connection.setLocalDescription(await connection.createOffer());
      await gatheringComplete(connection, 3000);
      const response = await fetch(endpoint, {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/sdp" }),
        body: connection.localDescription.sdp,
      });
      if (connection !== pc) return;
      if (response.status === 401) {
        say("Not allowed: open the full link camagent printed (it ends in ?token=...).");
        return;
      }
      if (response.status !== 201) {
        const text = (await response.text()).trim();
        say("The camera refused the connection (" + response.status + (text ? ": " + text : "") + ").");
        if (response.status >= 500) scheduleRetry();
        return;
      }
      const location = response.headers.get("Location");
      if (location) resource = new URL(location, endpoint).href;
      await connection.setRemoteDescription({ type: "answer", sdp: await response.text() });
    } catch (error) {
      if (connection !== pc) return;
      say("Could not reach the camera (" + error + ").");
      scheduleRetry();
    }
  }

  function formatBitrate(bps) {
    if (bps >= 1e6) return (bps / 1e6).toFixed(2) + " Mbit/s";
    return (bps / 1e3).toFixed(0) + " kbit/s";
  }

  function show(rows) {
    statsEl.replaceChildren();
    for (const [name, value] of rows) {
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = name;
      dd.textContent = value;
      statsEl.append(dt, dd);
    }
  }

  async function sample() {
    if (!pc) return;
    const report = await pc.getStats();
    let videoIn = null, audioIn = null, pair = null;
    const codecs = new Map();
    report.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "video") videoIn = s;
      else if (s.type === "inbound-rtp" && s.kind === "audio") audioIn = s;
      else if (s.type === "candidate-pair" && s.nominated && s.state === "succeeded") pair = s;
      else if (s.type === "codec") codecs.set(s.id, s.mimeType);
    });
    const now = { time: performance.now(), videoBytes: videoIn ? videoIn.bytesReceived : 0,
                  audioBytes: audioIn ? audioIn.bytesReceived : 0,
                  frames: videoIn ? (videoIn.framesDecoded || 0) : 0 };
    const seconds = previous ? (now.time - previous.time) / 1000 : 0;
    const rate = (a, b) => (seconds > 0 ? Math.max(0, a - b) / seconds : 0);
    const stats = {
      framesDecoded: now.frames,
      framesPerSecond: videoIn && videoIn.framesPerSecond !== undefined
        ? videoIn.framesPerSecond : (previous ? rate(now.frames, previous.frames) : 0),
      videoBitrate: previous ? rate(now.videoBytes, previous.videoBytes) * 8 : 0,
      videoPacketsLost: videoIn ? videoIn.packetsLost : 0,
      videoJitter: videoIn ? videoIn.jitter : 0,
      width: videoIn ? videoIn.frameWidth : undefined,
      height: videoIn ? videoIn.frameHeight : undefined,
      videoCodec: videoIn ? codecs.get(videoIn.codecId) : undefined,
      audioBytes: now.audioBytes,
      audioBitrate: previous ? rate(now.audioBytes, previous.audioBytes) * 8 : 0,
      audioPacketsLost: audioIn ? audioIn.packetsLost : 0,
      audioJitter: audioIn ? audioIn.jitter : 0,
      audioCodec: audioIn ? codecs.get(audioIn.codecId) : undefined,
      roundTripTime: pair ? pair.currentRoundTripTime : undefined,
    };
    previous = now;
    window.viewerStats = stats;
    const ms = (s) => (s === undefined ? "–" : (s * 1000).toFixed(1) + " ms");
    show([
      ["video", (stats.videoCodec || "–") + (stats.width ? "  " + stats.width + "×" + stats.height : "")],
      ["frames decoded", String(stats.framesDecoded)],
      ["frames/s", stats.framesPerSecond.toFixed(1)],
      ["video bitrate", formatBitrate(stats.videoBitrate)],
      ["video packets lost", String(stats.videoPacketsLost)],
      ["video jitter", ms(stats.videoJitter)],
      ["audio", stats.audioCodec || "–"],
      ["audio bytes", String(stats.audioBytes) + "  (" + formatBitrate(stats.audioBitrate) + ")"],
      ["audio packets lost", String(stats.audioPacketsLost)],
      ["audio jitter", ms(stats.audioJitter)],
      ["round trip", ms(stats.roundTripTime)],
    ]);
  }

  setInterval(() => { sample().catch(() => {}); }, 1000);
  window.addEventListener("pagehide", () => {
    deleteResource(true);
    if (pc) pc.close();
  });
  if (!window.RTCPeerConnection) {
    say("This browser cannot play WebRTC.");
  } else {
    connect();
  }
})();
</script>
</body>
</html>
"""#
