"""Label customer messages with a model; replayable byte for byte from recorded fixtures."""
