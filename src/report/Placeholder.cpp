// placeholder until the report layer lands
