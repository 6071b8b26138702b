"""Scrapy downloader middleware that reports what a crawl sees to proxybreakerd.

proxybreakerd judges every plain-HTTP response itself, but inside an HTTPS tunnel it sees only
bytes: a 403 page, a 429 or a CAPTCHA served over TLS reaches Scrapy and never the daemon. This
middleware reads each response as a site's verdict on the exit that carried it and POSTs that
verdict to the daemon's admin API (POST /api/report), so the daemon opens the (exit, site) pair,
closes the live tunnels on it, and sends the site's next requests through other exits.

It names the exit one of two ways:

* by the ``next-hop`` of the daemon's ``Proxy-Status`` header, which every plain-HTTP response
  through the daemon carries;
* for HTTPS, where Scrapy never sees the CONNECT reply's headers, by the proxy *username* the
  request used (``acct-session-abc``): the daemon maps the session to the exit that carried it for
  that site. The password is never sent, logged or kept.

Give each request a session in its proxy username (``meta["proxy"] =
"http://acct-session-42:pw@127.0.0.1:8118"``) so that its HTTPS pages can be reported; a request
without a session or a Proxy-Status cannot name its exit and is not reported.

Settings::

    DOWNLOADER_MIDDLEWARES = {
        # before HttpProxyMiddleware (750), which takes the credentials out of meta["proxy"]
        "proxybreaker_scrapy.ProxybreakerReportMiddleware": 700,
    }
    PROXYBREAKER_ADMIN = "http://127.0.0.1:8119"     # the daemon's -admin address
    PROXYBREAKER_CAPTCHA_MARKERS = ["g-recaptcha", "h-captcha", "cf-turnstile", ...]  # page text
    PROXYBREAKER_BAN_STATUSES = [403]                # reported as "forbidden" (the pool judges it)
    PROXYBREAKER_RETRY = True                         # retry a reported page (on another exit)
    PROXYBREAKER_REPORT_TIMEOUT = 5                   # seconds per report

What is reported:

=====================================  ============================================
the response                           the report's verdict
=====================================  ============================================
429 (Retry-After kept)                 ``rate_limited``
a page holding a CAPTCHA marker        ``captcha`` (a block: the pair opens at once)
a status in PROXYBREAKER_BAN_STATUSES  ``forbidden`` (a plain 403, judged by the pool's
                                       evidence: a ban while other exits are served)
=====================================  ============================================

A plain-HTTP response the daemon has judged already (its Proxy-Status details say so) is not
reported twice. The report runs in a thread and the response waits for it, so a retry is
scheduled only once the daemon has opened the pair; a report that fails is logged, never raised.
"""

import base64
import json
import logging
import re
import urllib.error
import urllib.request
from urllib.parse import unquote, urlsplit

from scrapy.downloadermiddlewares.retry import get_retry_request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

logger = logging.getLogger(__name__)

DEFAULT_CAPTCHA_MARKERS = [
    "g-recaptcha",
    "h-captcha",
    "hcaptcha.com",
    "cf-turnstile",
    "captcha-delivery.com",
    "px-captcha",
    "Please solve the CAPTCHA",
]

USERNAME_META = "proxybreaker_username"

_next_hop = re.compile(r'(?:^|[;,])\s*proxybreakerd\s*(?:;[^,]*)?;\s*next-hop="((?:[^"\\]|\\.)*)"')
_details = re.compile(r'(?:^|[;,])\s*proxybreakerd\s*(?:;[^,]*)?;\s*details="((?:[^"\\]|\\.)*)"')


def exit_from_proxy_status(value):
    """Return the exit label in the daemon's member of a Proxy-Status header value, or None."""
    m = _next_hop.search(value or "")
    return m.group(1).replace('\\"', '"').replace("\\\\", "\\") if m else None


def daemon_judged_block(value):
    """Whether the daemon's Proxy-Status details already judged the answer a failure."""
    m = _details.search(value or "")
    return bool(m) and m.group(1).split(" ")[0] in ("transient", "permanent")


def username_of(request):
    """The proxy username of a request (never its password), from meta["proxy"] or the
    Proxy-Authorization header HttpProxyMiddleware set; None without one."""
    proxy = request.meta.get("proxy")
    if proxy:
        parts = urlsplit(proxy)
        if parts.username:
            return unquote(parts.username)
    auth = request.headers.get(b"Proxy-Authorization")
    if auth and auth.startswith(b"Basic "):
        try:
            user = base64.b64decode(auth[6:]).decode("latin-1").split(":", 1)[0]
        except ValueError:
            return None
        return user or None
    return None


class ProxybreakerReportMiddleware:
    """Reports bans, 429s and CAPTCHAs a crawl sees to proxybreakerd's admin API."""

    def __init__(self, admin, markers, ban_statuses, retry, timeout):
        self.report_url = admin.rstrip("/") + "/api/report"
        self.markers = [m.encode() for m in markers]
        self.ban_statuses = set(ban_statuses)
        self.retry = retry
        self.timeout = timeout
        self.reported = 0

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        return cls(
            admin=s.get("PROXYBREAKER_ADMIN", "http://127.0.0.1:8119"),
            markers=s.getlist("PROXYBREAKER_CAPTCHA_MARKERS", DEFAULT_CAPTCHA_MARKERS),
            ban_statuses=[int(x) for x in s.getlist("PROXYBREAKER_BAN_STATUSES", [403])],
            retry=s.getbool("PROXYBREAKER_RETRY", True),
            timeout=s.getfloat("PROXYBREAKER_REPORT_TIMEOUT", 5.0),
        )

    def process_request(self, request, spider):
        # Runs before HttpProxyMiddleware moves the credentials out of meta["proxy"].
        if USERNAME_META not in request.meta:
            user = username_of(request)
            if user:
                request.meta[USERNAME_META] = user
        return None

    def verdict(self, response):
        """The verdict a response stands for, with its Retry-After, or (None, None)."""
        if response.status == 429:
            return "rate_limited", response.headers.get(b"Retry-After")
        body = response.body[:65536] if hasattr(response, "body") else b""
        if any(m in body for m in self.markers):
            return "captcha", None
        if response.status in self.ban_statuses:
            return "forbidden", None
        return None, None

    async def process_response(self, request, response, spider):
        verdict, retry_after = self.verdict(response)
        if verdict is None:
            return response
        status = response.headers.get(b"Proxy-Status", b"").decode("latin-1")
        report = {"site": response.url, "verdict": verdict, "detector": "scrapy"}
        exit_label = exit_from_proxy_status(status)
        if exit_label is not None:
            if daemon_judged_block(status):
                return self._retry(request, response, spider, verdict)
            report["exit"] = exit_label
        elif request.meta.get(USERNAME_META):
            report["username"] = request.meta[USERNAME_META]
        else:
            logger.warning("proxybreaker: %s on %s: no Proxy-Status and no session username, not reported",
                           verdict, response.url)
            return self._retry(request, response, spider, verdict)
        if retry_after and retry_after.strip().isdigit():
            report["retry_after"] = retry_after.strip().decode() + "s"
        result = await maybe_deferred_to_future(threads.deferToThread(self._post, report))
        if result is not None:
            self.reported += 1
            spider.crawler.stats.inc_value("proxybreaker/reported/" + verdict)
            logger.info("proxybreaker: reported %s on %s: exit %s, applied=%s, pair %s",
                        verdict, response.url, result.get("exit"), result.get("applied"), result.get("pair_state"))
        return self._retry(request, response, spider, verdict)

    def _retry(self, request, response, spider, verdict):
        if not self.retry:
            return response
        new = get_retry_request(request, spider=spider, reason="proxybreaker_" + verdict)
        return new or response

    def _post(self, report):
        """POST one report; returns the daemon's answer, or None after logging why not."""
        req = urllib.request.Request(self.report_url, data=json.dumps(report).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        # The admin API is on loopback: never through a proxy from the environment.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode())
        except urllib.error.HTTPError as e:
            logger.warning("proxybreaker: report on %s refused: %s %s", report["site"], e.code,
                           e.read(512).decode("utf-8", "replace").strip())
        except (OSError, ValueError) as e:
            logger.warning("proxybreaker: report on %s failed: %s", report["site"], e)
        return None
