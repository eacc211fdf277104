"""The console at ``/ui``: what the proxy did to each session, in a browser (docs/console.md).

What it keeps of each request (:mod:`.book`), the JSON it serves and its pages (:mod:`.pages`,
the static files in ``static/``, shipped in the wheel: no build step, nothing fetched).
"""
