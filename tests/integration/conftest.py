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
        return site, server, base

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
