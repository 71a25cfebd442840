"""MkDocs hook: the site's search works opened from disk (``file://``) too.

The theme's search runs lunr in a Web Worker that fetches ``search_index.json``; a page
opened from disk may start neither (Chromium: ``SecurityError: Failed to construct
'Worker'``). After the build this writes the index a second time as a script
(``search/search_index.js``) and changes the theme's ``search/main.js`` so that, opened
from disk or where workers are missing, it loads lunr and that script with ``<script>``
tags and searches on the page itself. Served over HTTP, the worker is used as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The end of the theme's main.js that starts the worker, and the test in doSearch that
# picks the page's own search: both must be found, or the build fails (a theme upgrade
# that changed them must be looked at, not shipped with a search that silently breaks).
WORKER_START = "if (!window.Worker) {"
SEARCH_HERE = "if (!window.Worker) {\n      displayResults(search(query));"

OFFLINE = """
var searchHere = window.location.protocol === 'file:' || !window.Worker;

function loadScriptHere (path, loaded) {
  var script = document.createElement('script');
  script.src = joinUrl(base_url, path);
  script.onload = loaded;
  script.onerror = function () { console.error('Could not load ' + path); };
  document.head.appendChild(script);
}

function startSearchHere () {
  loadScriptHere('search/lunr.js', function () {
    loadScriptHere('search/search_index.js', function () {
      var data = window.fencelockSearchIndex;
      var documents = {};
      if (data.config && data.config.separator && data.config.separator.length) {
        lunr.tokenizer.separator = new RegExp(data.config.separator);
      }
      var index = lunr(function () {
        this.field('title');
        this.field('text');
        this.ref('location');
        for (var i = 0; i < data.docs.length; i++) {
          this.add(data.docs[i]);
          documents[data.docs[i].location] = data.docs[i];
        }
      });
      window.search = function (query) {
        return index.search(query).map(function (result) {
          var doc = documents[result.ref];
          doc.summary = doc.text.substring(0, 200);
          return doc;
        });
      };
      if (data.config && data.config.min_search_length) {
        min_search_length = data.config.min_search_length - 1;
      }
      initSearch();
    });
  });
}

if (searchHere) {
  startSearchHere();
} else {
  var searchWorker = new Worker(joinUrl(base_url, "search/worker.js"));
  searchWorker.postMessage({init: true});
  searchWorker.onmessage = onWorkerMessage;
}
"""


def offline_main_js(theirs: str) -> str:
    """The theme's search/main.js, searching on the page where a worker cannot."""
    if SEARCH_HERE not in theirs or theirs.count(WORKER_START) != 2:
        raise ValueError("the theme's search/main.js changed: update site_hooks/offline_search.py")
    ours = theirs.replace(SEARCH_HERE, "if (searchHere) {\n      displayResults(search(query));")
    return ours[: ours.rindex(WORKER_START)] + OFFLINE.lstrip()


def on_post_build(config: Any) -> None:
    search = Path(config["site_dir"]) / "search"
    if not (search / "search_index.json").exists():
        return
    index = json.loads((search / "search_index.json").read_text())
    (search / "search_index.js").write_text(
        "window.fencelockSearchIndex = " + json.dumps(index, separators=(",", ":")) + ";\n"
    )
    main = search / "main.js"
    main.write_text(offline_main_js(main.read_text()))
