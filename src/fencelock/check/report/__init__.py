"""The report of a check run, one module per form.

:mod:`.terminal` (the table ``fencelock check`` prints), :mod:`.json_doc` (``--json`` and
``result.json``), :mod:`.page` (``report.html``) with its SVG timeline (:mod:`.timeline`,
:mod:`.grants`, :mod:`.failures`, :mod:`.faults`, :mod:`.layout`); :mod:`.summary` holds
what every form says alike.
"""
