"""mkdocs-gen-files script (mkdocs.yml): writes the site's reference pages from the code at build
time (dgb_dev.docsref). Nothing is written into docs/: the pages exist only in the build."""

import mkdocs_gen_files

from dgb_dev.docsref import PAGES

for path, render in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(render())
