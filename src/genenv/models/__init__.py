"""Language-model policies (one class for both players) and the embedded tiny default models."""
