(function () {
	"use strict";
	// The status page updates itself: every data-refresh-ms it fetches the page anew and swaps in
	// the element with id "live". No reload, so the scroll position stays. Served with a
	// Content-Security-Policy that allows this script by its hash and fetches to the page's origin.
	var every = Number(document.body.getAttribute("data-refresh-ms"));
	var status = document.getElementById("live-status");
	if (!(every > 0) || !window.fetch || !window.DOMParser || !window.AbortController) {
		return;
	}
	var busy = false;
	function say(text, stale) {
		if (status) {
			status.textContent = text;
			status.className = stale ? "stale" : "fresh";
		}
	}
	function update() {
		if (busy) {
			return;
		}
		busy = true;
		var url = new URL(window.location.href);
		url.searchParams.set("format", "html");
		var abort = new AbortController();
		var timer = window.setTimeout(function () { abort.abort(); }, Math.max(2 * every, 10000));
		fetch(url.toString(), { cache: "no-store", headers: { "Accept": "text/html" }, signal: abort.signal })
			.then(function (resp) {
				if (!resp.ok) {
					throw new Error("HTTP " + resp.status);
				}
				return resp.text();
			})
			.then(function (html) {
				var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
				var old = document.getElementById("live");
				if (!fresh || !old) {
					throw new Error("the answer has no #live element");
				}
				old.replaceWith(document.importNode(fresh, true));
				say("live: updated at " + new Date().toTimeString().slice(0, 8) + ", every " + every / 1000 + " s", false);
			})
			.catch(function (err) {
				say("not updating (" + err.message + "): retrying every " + every / 1000 + " s", true);
			})
			.finally(function () {
				window.clearTimeout(timer);
				busy = false;
			});
	}
	window.setInterval(update, every);
})();
