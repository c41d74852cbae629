"""GPU analyses the fusion passes and the code generators share: fusibility and heroes
(:mod:`.fusible`), reductions (:mod:`.reduction`), fusion indexing (:mod:`.indexing`)."""
