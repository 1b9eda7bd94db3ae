"""Provider-specific rules: server types, configuration and budgets of each provider."""
