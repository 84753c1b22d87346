"""Making room: what each stage of ``compact`` would do (``plan``), running the stages with
nothing lost (``engine``), the summary note built offline (``note``) and by a model
(``summarizers``), and what ``prepare-idle`` keeps between runs (``prepared``,
``idle_plan``). Imports the layers below it, the meter included."""
