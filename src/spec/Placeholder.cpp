// placeholder until the spec layer lands
