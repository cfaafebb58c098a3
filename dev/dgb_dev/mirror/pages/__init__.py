"""Page rendering of the mirror: the HTML and Plone JSON each route of :mod:`dgb_dev.mirror.site`
serves, from the content model of :mod:`dgb_dev.mirror.content`, one module per page kind:

- :mod:`.portal`: the gov.br portal frame, the mirror's index, an agency's home, the error page;
- :mod:`.plone_classic`: a gov.br agency's classic Plone news listing and article;
- :mod:`.plone_json`: its Plone 6 REST API (``@search``, item JSON), with :mod:`.plone_catalog`
  (the search's sort order and a summary's metadata columns);
- :mod:`.ebc`: the EBC sites' (Agência Brasil, TV Brasil) listings and articles;
- :mod:`.blocks` (article text as HTML / slate blocks) and :mod:`.jsonld`, which they share.
"""
