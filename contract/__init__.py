"""The contract between remedy's processes: task queues and workflow ids (``names``), every
activity with its argument and result types and the worker that serves it (``activities``),
every signal and query with its payload (``messages``), and the search attributes
(``search_attributes``). Workflows, activities, workers and the CLI go through it; nothing
else spells a name (tests/test_contract.py)."""
