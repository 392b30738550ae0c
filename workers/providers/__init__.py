"""The composition root: the one place a provider's settings become the seams the processes
run on (root.py). A provider (Kubernetes, the simulation; another scheduler the same way) is a
settings model in its adapter package (``adapters/<provider>/provider.py``) and one class
registered in root.py's ``PROVIDERS``; ``build(settings)`` gives the controller its ``Cluster``
and guarded jobs (``controller()``) and a node's agent its marks, its own node and which pod
uses which GPU (``node(name, host)``); ``local_host`` is the real node's own machine
(``LocalHost``). parts.py says what a provider gives, whichever it is (importing it loads no
adapter). Commands (workers/cli) parse flags into these settings and call here; the demo,
`remedy runbooks rehearse`, the chaos harness and tests build through here too."""
