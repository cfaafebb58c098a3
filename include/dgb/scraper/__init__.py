"""Scraping: pure parsers for gov.br (Plone 5 HTML, Plone 6 JSON) and EBC pages, identity helpers."""
