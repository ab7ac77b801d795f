// placeholder until the onnx layer lands
