"""Infrastructure: Pulumi ComponentResources built from the typed stack config."""
