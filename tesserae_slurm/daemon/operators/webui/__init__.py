"""The web page's assets (plain HTML, CSS and JS; no build step, no CDN), served by daemon/operators/web.py."""
