// The session page served at GET / by the router. One self-contained HTML
// file: no external scripts, styles or fonts, so it works on a LAN without
// internet. It speaks only the session contract (DESIGN.md § Sessions):
//
// - join: `/?session=SID&token=T` opens the signalling WebSocket
//   (/v2/sessions/SID/connect?token=T); #state is its state: "connecting",
//   "connected", "disconnected" (then it tries again after a pause);
// - every stream of the session (`connected`'s list, then streamCreated)
//   gets a tile: its name, its size, the state of its connection (the
//   RTCPeerConnection's connectionState), a muted <video>, a mute button and
//   stats from getStats() every second; the page subscribes to each stream
//   over WHEP (POST /v2/sessions/SID/streams/ID/subscribe with the token)
//   when the token's role may subscribe, and DELETEs the subscription when
//   the stream goes (streamDestroyed) or the page is left;
// - when the role may publish, "Publish my camera" sends the browser's
//   camera and microphone over WHIP (POST /v2/sessions/SID/publish
//   ?connectionId=CID), so an operator can talk back to a kiosk; `&publish=1`
//   in the URL does it at once, `&captions=1` asks for the browser's speech to
//   be captioned (publishCaptions), `&simulcast=1` sends the camera in two
//   sizes (RIDs "half" and "full", the smaller first, as the router takes
//   them), so that small tiles elsewhere get the half-size one. In a relayed session the page announces
//   its stream instead (a JSON POST to the same path) and answers each
//   subscriber's offer itself (subscribeOffer → subscribeAnswer, on a peer
//   connection of its own; unsubscribe closes it; one that fails is told
//   to the router as subscriberLeft). The page does not subscribe to its own stream;
// - it asks for every stream's captions (subscriberSettings subscribeToCaptions)
//   and shows them over the stream's video in an aria-live region;
// - each tile asks for the picture size it shows (subscriberSettings
//   preferredResolution, again when the tile is resized), so a wall of small
//   tiles gets a simulcasting publisher's small layer;
// - `window.sessionState` holds what the page knows, for scripts and tests:
//   connectionId, capabilities, and per stream its name, state and stats.

let sessionPageHTML = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>camagent session</title>
<link rel="icon" href="data:,">
<style>
  :root { color-scheme: dark; }
  * { box-sizing: border-box; }
  body { margin: 0; background: #111; color: #ddd; font: 15px/1.4 system-ui, sans-serif; }
  main { max-width: 1280px; margin: 0 auto; padding: 8px; }
  header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 16px; margin: 4px 0 8px; }
  #streams { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 8px; }
  .stream { background: #1b1b1b; border: 1px solid #333; border-radius: 4px; padding: 6px; }
  .stream h2 { font-size: 15px; margin: 0 0 4px; display: flex; justify-content: space-between; gap: 8px; }
  video { display: block; width: 100%; aspect-ratio: 16 / 9; background: #000; object-fit: contain; }
  button { font: inherit; padding: 4px 12px; border: 1px solid #555; border-radius: 4px; background: #2a2a2a; color: #eee; }
  .state[data-state="connected"], #state[data-state="connected"] { color: #6c6; }
  .state[data-state="failed"], #state[data-state="disconnected"] { color: #e66; }
  .view { position: relative; }
  /* Live captions over the bottom of the picture, as broadcast captions are. */
  .captions { position: absolute; left: 4%; right: 4%; bottom: 6%; text-align: center; font-size: 18px;
              line-height: 1.35; color: #fff; pointer-events: none; }
  .captions:empty { display: none; }
  .captions span { background: rgba(0, 0, 0, 0.75); padding: 2px 6px; box-decoration-break: clone;
                   -webkit-box-decoration-break: clone; }
  .captions[data-final="false"] span { color: #ddd; }
  dl.stats { display: grid; grid-template-columns: max-content 1fr; gap: 0 10px; margin: 4px 0 0;
             font: 12px/1.4 ui-monospace, monospace; }
  dl.stats dt { color: #999; }
  dl.stats dd { margin: 0; }
  #message { color: #e96; }
  #message:empty { display: none; }
</style>
</head>
<body>
<main>
  <header>
    <span>Session: <span id="state" data-state="connecting">connecting</span></span>
    <button id="publish" type="button" hidden>Publish my camera</button>
    <span id="publishState"></span>
  </header>
  <p id="message"></p>
  <div id="streams"></div>
</main>
<script>
"use strict";
(() => {
  const params = new URLSearchParams(location.search);
  const sessionId = params.get("session");
  const token = params.get("token");
  const base = new URL("/v2/sessions/" + encodeURIComponent(sessionId || "") + "/", location.href);
  const stateEl = document.getElementById("state");
  const messageEl = document.getElementById("message");
  const streamsEl = document.getElementById("streams");
  const publishButton = document.getElementById("publish");
  const publishStateEl = document.getElementById("publishState");

  const tiles = new Map();   // streamId → tile
  let socket = null;
  let connectionId = null;
  let rejoinKey = null;      // the router's key to take this connection back after a drop
  let capabilities = {};
  let ownStreamIds = new Set();
  let publishing = null;     // { pc, resource, media }; relayed: { media, resource, viewers: Map subscriberId → pc }
  let mediaMode = "routed";
  let retryDelay = 2000;
  const state = { connectionId: null, capabilities: {}, streams: {}, publishing: null };
  window.sessionState = state;

  function say(text) { messageEl.textContent = text || ""; }
  function setState(el, value) { el.textContent = value; el.dataset.state = value; }
  function authHeaders(extra) { return Object.assign({ "Authorization": "Bearer " + token }, extra); }

  function gatheringComplete(pc, limitMs) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, limitMs);   // go on with the candidates there are
      pc.addEventListener("icegatheringstatechange", () => {
        if (pc.iceGatheringState === "complete") { clearTimeout(timer); resolve(); }
      });
    });
  }

  // One WHIP or WHEP exchange: the offer after gathering, the answer applied, the resource kept.
  async function exchange(pc, url) {
    await pc.setLocalDescription(await pc.createOffer());
    await gatheringComplete(pc, 3000);
    const response = await fetch(url, { method: "POST", body: pc.localDescription.sdp,
                                        headers: authHeaders({ "Content-Type": "application/sdp" }) });
    if (response.status !== 201) {
      let text = await response.text();
      try { text = JSON.parse(text).message || text; } catch (e) { /* not JSON */ }
      throw new Error(response.status + " " + text);
    }
    const resource = new URL(response.headers.get("Location"), url).href;
    await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
    return resource;
  }

  function remove(resource, keepalive) {
    if (resource) fetch(resource, { method: "DELETE", headers: authHeaders(), keepalive: !!keepalive }).catch(() => {});
  }

  // MARK: stream tiles

  function addStream(stream) {
    if (tiles.has(stream.streamId) || ownStreamIds.has(stream.streamId)) return;
    if (stream.connectionId === connectionId) { ownStreamIds.add(stream.streamId); return; }
    const el = document.createElement("section");
    el.className = "stream";
    el.dataset.streamId = stream.streamId;
    el.innerHTML = '<h2><span class="name"></span><span class="state" data-state="new">new</span></h2>' +
      '<div class="view"><video autoplay muted playsinline></video>' +
      '<div class="captions" role="region" aria-live="polite" aria-label="Live captions"></div></div>' +
      '<button type="button" class="mute">Unmute</button><dl class="stats"></dl>';
    el.querySelector(".name").textContent = (stream.name || stream.streamId) +
      (stream.width ? " (" + stream.width + "×" + stream.height + ")" : "");
    streamsEl.appendChild(el);
    const tile = { stream, el, pc: null, resource: null, previous: null, timer: null,
                   video: el.querySelector("video"), stateEl: el.querySelector(".state") };
    tiles.set(stream.streamId, tile);
    state.streams[stream.streamId] = { name: stream.name, state: "new", stats: {} };
    const mute = el.querySelector(".mute");
    mute.addEventListener("click", () => {
      tile.video.muted = !tile.video.muted;
      mute.textContent = tile.video.muted ? "Unmute" : "Mute";
      if (!tile.video.muted) tile.video.play().catch(() => {});
    });
    if (capabilities.subscribe) subscribe(tile);
  }

  async function subscribe(tile) {
    const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
    tile.pc = pc;
    const media = new MediaStream();
    tile.video.srcObject = media;
    if (tile.stream.hasVideo !== false) pc.addTransceiver("video", { direction: "recvonly" });
    if (tile.stream.hasAudio !== false) pc.addTransceiver("audio", { direction: "recvonly" });
    pc.addEventListener("track", (event) => { media.addTrack(event.track); tile.video.play().catch(() => {}); });
    pc.addEventListener("connectionstatechange", () => {
      setState(tile.stateEl, pc.connectionState);
      if (state.streams[tile.stream.streamId]) state.streams[tile.stream.streamId].state = pc.connectionState;
    });
    try {
      const url = new URL("streams/" + encodeURIComponent(tile.stream.streamId) + "/subscribe", base);
      url.searchParams.set("connectionId", connectionId);
      tile.resource = await exchange(pc, url.href);
      // Captions of this stream come over the signalling, to this connection, once asked for;
      // asked at once, so they show as soon as the session's captions start. The tile's size
      // goes with them, and again whenever the tile is resized.
      tile.subscriberId = tile.resource.split("/").pop();
      sendWishes(tile, { subscribeToCaptions: true });
      tile.resize = new ResizeObserver(() => {
        clearTimeout(tile.resizeTimer);
        tile.resizeTimer = setTimeout(() => sendWishes(tile, {}), 300);
      });
      tile.resize.observe(tile.video);
    } catch (e) {
      setState(tile.stateEl, "failed");
      say("subscribing to " + (tile.stream.name || tile.stream.streamId) + " failed: " + e.message);
      return;
    }
    tile.timer = setInterval(() => sample(tile), 1000);
  }

  // A partial replaces the text shown; a final stays until the next caption, or 6 s.
  // The size a tile shows its picture at, in device pixels, times √2: the router sends the
  // largest simulcast layer within it, and each layer is half the size of the one above, so
  // the layer nearest the tile's own size comes (a stream of one layer comes as it is).
  // Nothing while the tile is not laid out.
  function wantedResolution(tile) {
    const scale = (window.devicePixelRatio || 1) * Math.SQRT2;
    // (At most the router's largest size, 7680x4320.)
    const width = Math.min(7680, Math.round(tile.video.clientWidth * scale));
    const height = Math.min(4320, Math.round(tile.video.clientHeight * scale));
    return width > 0 && height > 0 ? { width, height } : null;
  }

  // subscriberSettings for a tile's subscription: `extra`, and its size when that changed.
  function sendWishes(tile, extra) {
    if (!tile.subscriberId || !socket || socket.readyState !== WebSocket.OPEN) return;
    const message = Object.assign({ type: "subscriberSettings", subscriberId: tile.subscriberId }, extra);
    const wanted = wantedResolution(tile);
    if (wanted && (!tile.wanted || wanted.width !== tile.wanted.width || wanted.height !== tile.wanted.height)) {
      message.preferredResolution = wanted;
      tile.wanted = wanted;
      if (state.streams[tile.stream.streamId]) state.streams[tile.stream.streamId].preferredResolution = wanted;
    }
    if (Object.keys(message).length > 2) socket.send(JSON.stringify(message));
  }

  function showCaption(tile, text, isFinal) {
    const el = tile.el.querySelector(".captions");
    clearTimeout(tile.captionTimer);
    el.replaceChildren();
    if (text) {
      const span = document.createElement("span");
      span.textContent = text;
      el.appendChild(span);
    }
    el.dataset.final = String(isFinal);
    if (isFinal && text) tile.captionTimer = setTimeout(() => el.replaceChildren(), 6000);
    if (state.streams[tile.stream.streamId]) state.streams[tile.stream.streamId].caption = { text, isFinal };
  }

  function removeStream(streamId) {
    ownStreamIds.delete(streamId);
    const tile = tiles.get(streamId);
    if (!tile) return;
    tiles.delete(streamId);
    delete state.streams[streamId];
    clearInterval(tile.timer);
    clearTimeout(tile.resizeTimer);
    if (tile.resize) tile.resize.disconnect();
    if (tile.pc) tile.pc.close();
    remove(tile.resource);
    tile.el.remove();
  }

  async function sample(tile) {
    if (!tile.pc) return;
    const report = await tile.pc.getStats();
    const s = {};
    report.forEach((r) => {
      if (r.type === "inbound-rtp" && r.kind === "video") {
        s.framesDecoded = r.framesDecoded; s.videoBytes = r.bytesReceived; s.videoLost = r.packetsLost;
        s.width = r.frameWidth; s.height = r.frameHeight;
      } else if (r.type === "inbound-rtp" && r.kind === "audio") {
        s.audioBytes = r.bytesReceived; s.audioLost = r.packetsLost;
      } else if (r.type === "candidate-pair" && r.nominated && r.currentRoundTripTime !== undefined) {
        s.rtt = r.currentRoundTripTime;
      }
    });
    const p = tile.previous;
    if (p) {
      s.fps = Math.max(0, (s.framesDecoded || 0) - (p.framesDecoded || 0));
      s.kbps = Math.round(Math.max(0, ((s.videoBytes || 0) + (s.audioBytes || 0) - (p.videoBytes || 0) - (p.audioBytes || 0)) * 8 / 1000));
    }
    tile.previous = s;
    if (state.streams[tile.stream.streamId]) state.streams[tile.stream.streamId].stats = s;
    const rows = [["frames", s.framesDecoded], ["fps", s.fps], ["kbit/s", s.kbps],
                  ["size", s.width ? s.width + "×" + s.height : undefined],
                  ["lost", (s.videoLost || 0) + (s.audioLost || 0)], ["rtt", s.rtt !== undefined ? Math.round(s.rtt * 1000) + " ms" : undefined]];
    const dl = tile.el.querySelector(".stats");
    dl.replaceChildren();
    for (const [k, v] of rows) {
      if (v === undefined) continue;
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = String(v);
      dl.append(dt, dd);
    }
  }

  // MARK: publishing the browser's camera

  async function publish() {
    if (publishing) return;
    publishButton.disabled = true;
    publishStateEl.textContent = "asking for the camera…";
    state.publishing = { state: "starting" };
    try {
      if (!navigator.mediaDevices) {
        throw new Error("this browser gives the camera only to secure pages (https://, or http://localhost)");
      }
      const media = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 }, audio: true });
      if (mediaMode === "relayed") { await announceRelayed(media); return; }
      const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
      for (const track of media.getTracks()) {
        const init = { direction: "sendonly" };
        if (track.kind === "video" && params.get("simulcast") === "1") {
          init.sendEncodings = [{ rid: "half", scaleResolutionDownBy: 2 }, { rid: "full" }];
        }
        pc.addTransceiver(track, init);
      }
      pc.addEventListener("connectionstatechange", () => {
        publishStateEl.textContent = "publishing: " + pc.connectionState;
        state.publishing.state = pc.connectionState;
      });
      publishing = { pc, media, resource: null };
      const url = new URL("publish", base);
      url.searchParams.set("connectionId", connectionId || "");
      if (params.get("captions") === "1") url.searchParams.set("publishCaptions", "true");
      publishing.resource = await exchange(pc, url.href);
      publishButton.textContent = "Stop publishing";
      publishButton.disabled = false;
    } catch (e) {
      publishStateEl.textContent = "";
      say("publishing failed: " + e.message);
      state.publishing = { state: "failed", error: e.message };
      stopPublishing();
    }
  }

  // Relayed: the stream is announced, and each subscriber is answered from here.
  async function announceRelayed(media) {
    publishing = { media, resource: null, viewers: new Map() };
    const settings = (media.getVideoTracks()[0] || { getSettings: () => ({}) }).getSettings();
    const url = new URL("publish", base);
    url.searchParams.set("connectionId", connectionId || "");
    const response = await fetch(url.href, { method: "POST", headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ hasAudio: media.getAudioTracks().length > 0, hasVideo: media.getVideoTracks().length > 0,
                             videoType: "camera", width: settings.width || 0, height: settings.height || 0 }) });
    if (response.status !== 201) {
      let text = await response.text();
      try { text = JSON.parse(text).message || text; } catch (e) { /* not JSON */ }
      throw new Error(response.status + " " + text);
    }
    publishing.resource = new URL(response.headers.get("Location"), url).href;
    state.publishing.state = "announced";
    publishStateEl.textContent = "publishing (relayed): waiting for subscribers";
    publishButton.textContent = "Stop publishing";
    publishButton.disabled = false;
  }

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  async function answerOffer(subscriberId, sdp) {
    if (!publishing || !publishing.viewers) {
      send({ type: "subscribeError", subscriberId, code: 503, message: "this page is not publishing" });
      return;
    }
    const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle" });
    publishing.viewers.set(subscriberId, pc);
    pc.addEventListener("connectionstatechange", () => {
      const viewers = publishing && publishing.viewers;
      if (pc.connectionState === "connected") {
        state.publishing.state = "connected";
        publishStateEl.textContent = "publishing (relayed): " + viewers.size + " subscriber(s)";
      }
      // Gone without the router's unsubscribe (a closed tab): the router stops counting it.
      if (pc.connectionState === "failed" && viewers && viewers.get(subscriberId) === pc) {
        viewers.delete(subscriberId);
        pc.close();
        send({ type: "subscriberLeft", subscriberId });
      }
    });
    try {
      await pc.setRemoteDescription({ type: "offer", sdp });
      for (const transceiver of pc.getTransceivers()) {
        const track = publishing.media.getTracks().find((t) => t.kind === transceiver.receiver.track.kind);
        if (track) {
          await transceiver.sender.replaceTrack(track);
          transceiver.direction = "sendonly";
        } else {
          transceiver.direction = "inactive";
        }
      }
      await pc.setLocalDescription(await pc.createAnswer());
      await gatheringComplete(pc, 3000);
      send({ type: "subscribeAnswer", subscriberId, sdp: pc.localDescription.sdp });
    } catch (e) {
      publishing.viewers.delete(subscriberId);
      pc.close();
      send({ type: "subscribeError", subscriberId, code: 400, message: String(e.message || e).slice(0, 400) });
    }
  }

  function closeViewer(subscriberId) {
    const pc = publishing && publishing.viewers && publishing.viewers.get(subscriberId);
    if (!pc) return;
    publishing.viewers.delete(subscriberId);
    pc.close();
  }

  function stopPublishing(keepalive) {
    if (!publishing) { publishButton.disabled = false; return; }
    if (publishing.pc) publishing.pc.close();
    for (const pc of (publishing.viewers || new Map()).values()) pc.close();
    publishing.media.getTracks().forEach((t) => t.stop());
    remove(publishing.resource, keepalive);
    publishing = null;
    publishButton.textContent = "Publish my camera";
    publishButton.disabled = false;
    publishStateEl.textContent = "";
  }

  publishButton.addEventListener("click", () => { if (publishing) stopPublishing(); else publish(); });

  // MARK: signalling

  function connect() {
    setState(stateEl, "connecting");
    const url = new URL("connect", base);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("token", token);
    // Joining again: this page's connection asked back (the router keeps it a few
    // seconds after the socket broke, with the camera's stream).
    if (connectionId && rejoinKey) {
      url.searchParams.set("connectionId", connectionId);
      url.searchParams.set("rejoinKey", rejoinKey);
    }
    socket = new WebSocket(url.href);
    socket.addEventListener("message", (event) => {
      let m;
      try { m = JSON.parse(event.data); } catch (e) { return; }
      switch (m.type) {
        case "connected":
          retryDelay = 2000;
          // A new connection, not this page's old one: a stream it published went with the old,
          // and is published again under the new one.
          const republish = !!(connectionId && m.connectionId !== connectionId && publishing);
          if (republish) stopPublishing(false);
          connectionId = m.connectionId;
          rejoinKey = m.rejoinKey || null;
          capabilities = m.capabilities || {};
          mediaMode = m.mediaMode || "routed";
          state.mediaMode = mediaMode;
          state.connectionId = connectionId;
          state.capabilities = capabilities;
          setState(stateEl, "connected");
          say("");
          publishButton.hidden = !capabilities.publish;
          for (const s of m.streams || []) addStream(s);
          if (capabilities.publish && (params.get("publish") === "1" || republish)) publish();
          break;
        case "streamCreated": addStream(m.stream); break;
        case "streamDestroyed": removeStream(m.streamId); break;
        case "caption": {
          const tile = tiles.get(m.streamId);
          if (tile) showCaption(tile, m.text, !!m.isFinal);
          break;
        }
        case "streamPropertyChanged": {
          const tile = tiles.get(m.streamId);
          if (tile && m.property === "hasCaptions" && m.newValue === false) showCaption(tile, "", true);
          break;
        }
        case "connectionDestroyed":
          if (m.connectionId === connectionId) say("disconnected by the session: " + m.reason);
          break;
        case "subscribeOffer": answerOffer(m.subscriberId, m.sdp); break;
        case "unsubscribe": closeViewer(m.subscriberId); break;
        case "error": say(m.message || "error"); break;
        default: break;
      }
    });
    socket.addEventListener("close", (event) => {
      setState(stateEl, "disconnected");
      for (const id of Array.from(tiles.keys())) removeStream(id);
      if (event.code === 1008 || event.code === 4001 || event.code === 4003) { say("the session refused this token"); return; }
      // A moderator's force disconnect: the page stays out (joining again with the same
      // token would undo it), and its own camera stops.
      if (event.reason === "forceDisconnected") {
        state.ended = "forceDisconnected";
        stopPublishing(false);
        say("disconnected by a moderator");
        return;
      }
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 15000);
    });
  }

  if (!sessionId || !token) {
    setState(stateEl, "disconnected");
    say("This page needs ?session=SESSION_ID&token=TOKEN in its address.");
  } else {
    connect();
  }
  window.addEventListener("pagehide", () => {
    for (const tile of tiles.values()) remove(tile.resource, true);
    stopPublishing(true);
  });
})();
</script>
</body>
</html>
"""#
