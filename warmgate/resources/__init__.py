"""Pure builders: CR + plan -> Job / Deployment / ConfigMap / Service manifests."""
