"""Crawl sites through proxybreakerd with the report middleware: a runnable example.

    /usr/bin/python3 examples/scrapy/crawl.py --proxy http://127.0.0.1:8118 \\
        --admin http://127.0.0.1:8119 https://shop.example/ http://blog.example/

Each start page and every link it holds (same site) is fetched once, each request with a session
of its own in the proxy username (acct-session-<n>), so that the daemon spreads them over its exits
and the middleware can name the exit of an HTTPS page by its session. One line of JSON per page
fetched goes to stdout ({"url", "status", "captcha"}), and a summary line at the end
({"summary": {"reported": n, ...}}).

Debian: apt-get install python3-scrapy; run it with /usr/bin/python3.
"""

import argparse
import json
import os
import sys
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import scrapy  # noqa: E402
from scrapy.crawler import CrawlerProcess  # noqa: E402

from proxybreaker_scrapy import DEFAULT_CAPTCHA_MARKERS  # noqa: E402


def with_user(proxy, user):
    """proxy with user (and a placeholder password the daemon does not check) as its userinfo."""
    p = urlsplit(proxy)
    return urlunsplit((p.scheme, "%s:x@%s" % (user, p.netloc), p.path, p.query, p.fragment))


class SiteSpider(scrapy.Spider):
    name = "proxybreaker-example"

    def __init__(self, starts, proxy, account, **kw):
        super().__init__(**kw)
        self.starts, self.proxy, self.account = starts, proxy, account
        self.n = 0

    def request(self, url):
        self.n += 1
        meta = {"proxy": with_user(self.proxy, "%s-session-s%d" % (self.account, self.n))}
        return scrapy.Request(url, meta=meta, callback=self.parse)

    def start_requests(self):
        for u in self.starts:
            yield self.request(u)

    def parse(self, response):
        captcha = any(m.encode() in response.body for m in DEFAULT_CAPTCHA_MARKERS)
        print(json.dumps({"url": response.url, "status": response.status, "captcha": captcha}), flush=True)
        host = urlsplit(response.url).netloc
        for href in response.css("a::attr(href)").getall():
            u = response.urljoin(href)
            if urlsplit(u).netloc == host:
                yield self.request(u)

    def closed(self, reason):
        stats = self.crawler.stats.get_stats()
        print(json.dumps({"summary": {
            "reason": reason,
            "reported": sum(v for k, v in stats.items() if k.startswith("proxybreaker/reported/")),
            "retries": stats.get("retry/count", 0),
            "responses": stats.get("downloader/response_count", 0),
        }}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proxy", required=True, help="the daemon's listener, http://127.0.0.1:8118")
    ap.add_argument("--admin", required=True, help="the daemon's admin address, http://127.0.0.1:8119")
    ap.add_argument("--account", default="acct", help="the account part of the proxy username")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("start", nargs="+", help="start URLs")
    a = ap.parse_args()
    process = CrawlerProcess(settings={
        "DOWNLOADER_MIDDLEWARES": {"proxybreaker_scrapy.ProxybreakerReportMiddleware": 700},
        "PROXYBREAKER_ADMIN": a.admin,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "CONCURRENT_REQUESTS": a.concurrency,
        "DOWNLOAD_TIMEOUT": 20,
        "RETRY_TIMES": 3,
        "LOG_LEVEL": "INFO",
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    })
    process.crawl(SiteSpider, starts=a.start, proxy=a.proxy, account=a.account)
    process.start()


if __name__ == "__main__":
    main()
