// placeholder until the relation layer lands
