// jetcron dashboard: times in the viewer's zone (UTC on hover), and a run's output followed over SSE.
"use strict";

function localTimes(root) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    if (el.dataset.local) continue;
    const at = new Date(el.getAttribute("datetime"));
    if (isNaN(at)) continue;
    el.title = el.getAttribute("datetime") + " (UTC)";
    el.textContent = at.toLocaleString(undefined, {dateStyle: "medium", timeStyle: "medium"});
    el.dataset.local = "1";
  }
}

function followLog() {
  const log = document.getElementById("log");
  if (!log || !log.dataset.follow) return;
  const status = document.getElementById("log-status");
  const source = new EventSource(log.dataset.follow);
  source.addEventListener("log", (event) => {
    log.append(document.createTextNode(JSON.parse(event.data)));
    log.scrollTop = log.scrollHeight;
  });
  source.addEventListener("end", (event) => {
    source.close();
    status.textContent = "the run ended: " + JSON.parse(event.data);
    status.dataset.ended = JSON.parse(event.data);
  });
  source.onerror = () => {
    // The server closes the stream after `end`; any other loss is retried by EventSource itself, unless the
    // server refused the stream (an ended session, or too many streams of this login open at once: 429).
    if (status.dataset.ended) source.close();
    else if (source.readyState === EventSource.CLOSED)
      status.textContent = "not following: the gateway refused the stream (logged out, or too many pages " +
        "following output at once); reload to try again";
  };
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  followLog();
  document.body.addEventListener("htmx:afterSwap", (event) => localTimes(event.target));
});
