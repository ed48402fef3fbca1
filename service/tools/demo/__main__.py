"""``python -m service.tools.demo``: the whole demo (:func:`service.tools.demo.story.main`)."""

from service.tools.demo.story import main

main()
