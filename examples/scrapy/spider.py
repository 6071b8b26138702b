"""A spider for the middleware's test and for trying it by hand:

    scrapy runspider spider.py -a url=https://shop.example/item -a n=3 -o pages.json \
        -s PROXYBREAKERD_PROXY=http://acct-session-s1:pw@127.0.0.1:8118 \
        -s PROXYBREAKERD_ADMIN=http://127.0.0.1:8119

It fetches url n times (one after the other) and yields each page's text.
"""

import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {"proxybreakerd_middleware.ProxybreakerdMiddleware": 740},
        "CONCURRENT_REQUESTS": 1,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
    }

    def __init__(self, url="", n="3", **kw):
        super().__init__(**kw)
        self.url, self.n = url, int(n)

    def start_requests(self):
        for i in range(self.n):
            yield scrapy.Request(self.url, dont_filter=True, priority=-i, meta={"i": i})

    def parse(self, response):
        yield {"i": response.meta["i"], "text": response.text,
               "retries": response.meta.get("proxybreakerd_retries", 0)}
