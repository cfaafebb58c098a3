import pytest

from .support import start_site


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """Factory: ``mirror(articles) -> (site, server, base_url)``; servers stop after the test."""
    monkeypatch.delenv("DGB_MIRROR_EXTRA", raising=False)
    servers = []

    def start(articles):
        site, server, base = start_site(articles, tmp_path)
        servers.append(server)
        # the fetcher's URL guard allows the local site as the configured mirror (mirror mode)
        monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
        monkeypatch.setenv("DGB_MIRROR_URL", base)
        return site, server, base

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
