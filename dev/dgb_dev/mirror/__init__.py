"""The mirror: a local gov.br-like web site that tests and the offline stack scrape.

One port serves many hosts: ``http://127.0.0.1:PORT/<original host>/<original path>``
(``/www.gov.br/mec/pt-br/assuntos/noticias``, ``/agenciabrasil.ebc.com.br/ultimas``). Content
comes from the article corpus plus ``DGB_MIRROR_EXTRA``; see :mod:`dgb_dev.mirror.site` for the
URL map, :mod:`dgb_dev.mirror.pages` for the markup, :mod:`dgb_dev.mirror.server` for faults and the
control API.
"""

from dgb_dev.mirror.content import Article
from dgb_dev.mirror.server import Faults, MirrorServer, start_in_thread
from dgb_dev.mirror.site import Response, Site

__all__ = ["Article", "Faults", "MirrorServer", "Response", "Site", "start_in_thread"]
