"""Moving a tensor's values from one carrier into another."""
