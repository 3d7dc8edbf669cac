// Psi = 7.5e9 parameters: 75 bias-free linear layers of 10000 x 10000, the
// model size of ZeRO's Figure 1 (Rajbhandari et al., SC20). Only planned, never run.
func.func @forward(%x: tensor<64x10000xf32> {nn.data = "features"}, %y: tensor<64xi32> {nn.data = "labels"},
    %w0: tensor<10000x10000xf32> {nn.param = "layers.0.weight", nn.init = "normal(0.01)"},
    %w1: tensor<10000x10000xf32> {nn.param = "layers.1.weight", nn.init = "normal(0.01)"},
    %w2: tensor<10000x10000xf32> {nn.param = "layers.2.weight", nn.init = "normal(0.01)"},
    %w3: tensor<10000x10000xf32> {nn.param = "layers.3.weight", nn.init = "normal(0.01)"},
    %w4: tensor<10000x10000xf32> {nn.param = "layers.4.weight", nn.init = "normal(0.01)"},
    %w5: tensor<10000x10000xf32> {nn.param = "layers.5.weight", nn.init = "normal(0.01)"},
    %w6: tensor<10000x10000xf32> {nn.param = "layers.6.weight", nn.init = "normal(0.01)"},
    %w7: tensor<10000x10000xf32> {nn.param = "layers.7.weight", nn.init = "normal(0.01)"},
    %w8: tensor<10000x10000xf32> {nn.param = "layers.8.weight", nn.init = "normal(0.01)"},
    %w9: tensor<10000x10000xf32> {nn.param = "layers.9.weight", nn.init = "normal(0.01)"},
    %w10: tensor<10000x10000xf32> {nn.param = "layers.10.weight", nn.init = "normal(0.01)"},
    %w11: tensor<10000x10000xf32> {nn.param = "layers.11.weight", nn.init = "normal(0.01)"},
    %w12: tensor<10000x10000xf32> {nn.param = "layers.12.weight", nn.init = "normal(0.01)"},
    %w13: tensor<10000x10000xf32> {nn.param = "layers.13.weight", nn.init = "normal(0.01)"},
    %w14: tensor<10000x10000xf32> {nn.param = "layers.14.weight", nn.init = "normal(0.01)"},
    %w15: tensor<10000x10000xf32> {nn.param = "layers.15.weight", nn.init = "normal(0.01)"},
    %w16: tensor<10000x10000xf32> {nn.param = "layers.16.weight", nn.init = "normal(0.01)"},
    %w17: tensor<10000x10000xf32> {nn.param = "layers.17.weight", nn.init = "normal(0.01)"},
    %w18: tensor<10000x10000xf32> {nn.param = "layers.18.weight", nn.init = "normal(0.01)"},
    %w19: tensor<10000x10000xf32> {nn.param = "layers.19.weight", nn.init = "normal(0.01)"},
    %w20: tensor<10000x10000xf32> {nn.param = "layers.20.weight", nn.init = "normal(0.01)"},
    %w21: tensor<10000x10000xf32> {nn.param = "layers.21.weight", nn.init = "normal(0.01)"},
    %w22: tensor<10000x10000xf32> {nn.param = "layers.22.weight", nn.init = "normal(0.01)"},
    %w23: tensor<10000x10000xf32> {nn.param = "layers.23.weight", nn.init = "normal(0.01)"},
    %w24: tensor<10000x10000xf32> {nn.param = "layers.24.weight", nn.init = "normal(0.01)"},
    %w25: tensor<10000x10000xf32> {nn.param = "layers.25.weight", nn.init = "normal(0.01)"},
    %w26: tensor<10000x10000xf32> {nn.param = "layers.26.weight", nn.init = "normal(0.01)"},
    %w27: tensor<10000x10000xf32> {nn.param = "layers.27.weight", nn.init = "normal(0.01)"},
    %w28: tensor<10000x10000xf32> {nn.param = "layers.28.weight", nn.init = "normal(0.01)"},
    %w29: tensor<10000x10000xf32> {nn.param = "layers.29.weight", nn.init = "normal(0.01)"},
    %w30: tensor<10000x10000xf32> {nn.param = "layers.30.weight", nn.init = "normal(0.01)"},
    %w31: tensor<10000x10000xf32> {nn.param = "layers.31.weight", nn.init = "normal(0.01)"},
    %w32: tensor<10000x10000xf32> {nn.param = "layers.32.weight", nn.init = "normal(0.01)"},
    %w33: tensor<10000x10000xf32> {nn.param = "layers.33.weight", nn.init = "normal(0.01)"},
    %w34: tensor<10000x10000xf32> {nn.param = "layers.34.weight", nn.init = "normal(0.01)"},
    %w35: tensor<10000x10000xf32> {nn.param = "layers.35.weight", nn.init = "normal(0.01)"},
    %w36: tensor<10000x10000xf32> {nn.param = "layers.36.weight", nn.init = "normal(0.01)"},
    %w37: tensor<10000x10000xf32> {nn.param = "layers.37.weight", nn.init = "normal(0.01)"},
    %w38: tensor<10000x10000xf32> {nn.param = "layers.38.weight", nn.init = "normal(0.01)"},
    %w39: tensor<10000x10000xf32> {nn.param = "layers.39.weight", nn.init = "normal(0.01)"},
    %w40: tensor<10000x10000xf32> {nn.param = "layers.40.weight", nn.init = "normal(0.01)"},
    %w41: tensor<10000x10000xf32> {nn.param = "layers.41.weight", nn.init = "normal(0.01)"},
    %w42: tensor<10000x10000xf32> {nn.param = "layers.42.weight", nn.init = "normal(0.01)"},
    %w43: tensor<10000x10000xf32> {nn.param = "layers.43.weight", nn.init = "normal(0.01)"},
    %w44: tensor<10000x10000xf32> {nn.param = "layers.44.weight", nn.init = "normal(0.01)"},
    %w45: tensor<10000x10000xf32> {nn.param = "layers.45.weight", nn.init = "normal(0.01)"},
    %w46: tensor<10000x10000xf32> {nn.param = "layers.46.weight", nn.init = "normal(0.01)"},
    %w47: tensor<10000x10000xf32> {nn.param = "layers.47.weight", nn.init = "normal(0.01)"},
    %w48: tensor<10000x10000xf32> {nn.param = "layers.48.weight", nn.init = "normal(0.01)"},
    %w49: tensor<10000x10000xf32> {nn.param = "layers.49.weight", nn.init = "normal(0.01)"},
    %w50: tensor<10000x10000xf32> {nn.param = "layers.50.weight", nn.init = "normal(0.01)"},
    %w51: tensor<10000x10000xf32> {nn.param = "layers.51.weight", nn.init = "normal(0.01)"},
    %w52: tensor<10000x10000xf32> {nn.param = "layers.52.weight", nn.init = "normal(0.01)"},
    %w53: tensor<10000x10000xf32> {nn.param = "layers.53.weight", nn.init = "normal(0.01)"},
    %w54: tensor<10000x10000xf32> {nn.param = "layers.54.weight", nn.init = "normal(0.01)"},
    %w55: tensor<10000x10000xf32> {nn.param = "layers.55.weight", nn.init = "normal(0.01)"},
    %w56: tensor<10000x10000xf32> {nn.param = "layers.56.weight", nn.init = "normal(0.01)"},
    %w57: tensor<10000x10000xf32> {nn.param = "layers.57.weight", nn.init = "normal(0.01)"},
    %w58: tensor<10000x10000xf32> {nn.param = "layers.58.weight", nn.init = "normal(0.01)"},
    %w59: tensor<10000x10000xf32> {nn.param = "layers.59.weight", nn.init = "normal(0.01)"},
    %w60: tensor<10000x10000xf32> {nn.param = "layers.60.weight", nn.init = "normal(0.01)"},
    %w61: tensor<10000x10000xf32> {nn.param = "layers.61.weight", nn.init = "normal(0.01)"},
    %w62: tensor<10000x10000xf32> {nn.param = "layers.62.weight", nn.init = "normal(0.01)"},
    %w63: tensor<10000x10000xf32> {nn.param = "layers.63.weight", nn.init = "normal(0.01)"},
    %w64: tensor<10000x10000xf32> {nn.param = "layers.64.weight", nn.init = "normal(0.01)"},
    %w65: tensor<10000x10000xf32> {nn.param = "layers.65.weight", nn.init = "normal(0.01)"},
    %w66: tensor<10000x10000xf32> {nn.param = "layers.66.weight", nn.init = "normal(0.01)"},
    %w67: tensor<10000x10000xf32> {nn.param = "layers.67.weight", nn.init = "normal(0.01)"},
    %w68: tensor<10000x10000xf32> {nn.param = "layers.68.weight", nn.init = "normal(0.01)"},
    %w69: tensor<10000x10000xf32> {nn.param = "layers.69.weight", nn.init = "normal(0.01)"},
    %w70: tensor<10000x10000xf32> {nn.param = "layers.70.weight", nn.init = "normal(0.01)"},
    %w71: tensor<10000x10000xf32> {nn.param = "layers.71.weight", nn.init = "normal(0.01)"},
    %w72: tensor<10000x10000xf32> {nn.param = "layers.72.weight", nn.init = "normal(0.01)"},
    %w73: tensor<10000x10000xf32> {nn.param = "layers.73.weight", nn.init = "normal(0.01)"},
    %w74: tensor<10000x10000xf32> {nn.param = "layers.74.weight", nn.init = "normal(0.01)"}) -> (tensor<f32> {nn.loss}) {
  %h0 = nn.linear %x, %w0 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h1 = nn.linear %h0, %w1 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h2 = nn.linear %h1, %w2 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h3 = nn.linear %h2, %w3 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h4 = nn.linear %h3, %w4 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h5 = nn.linear %h4, %w5 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h6 = nn.linear %h5, %w6 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h7 = nn.linear %h6, %w7 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h8 = nn.linear %h7, %w8 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h9 = nn.linear %h8, %w9 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h10 = nn.linear %h9, %w10 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h11 = nn.linear %h10, %w11 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h12 = nn.linear %h11, %w12 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h13 = nn.linear %h12, %w13 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h14 = nn.linear %h13, %w14 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h15 = nn.linear %h14, %w15 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h16 = nn.linear %h15, %w16 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h17 = nn.linear %h16, %w17 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h18 = nn.linear %h17, %w18 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h19 = nn.linear %h18, %w19 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h20 = nn.linear %h19, %w20 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h21 = nn.linear %h20, %w21 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h22 = nn.linear %h21, %w22 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h23 = nn.linear %h22, %w23 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h24 = nn.linear %h23, %w24 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h25 = nn.linear %h24, %w25 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h26 = nn.linear %h25, %w26 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h27 = nn.linear %h26, %w27 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h28 = nn.linear %h27, %w28 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h29 = nn.linear %h28, %w29 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h30 = nn.linear %h29, %w30 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h31 = nn.linear %h30, %w31 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h32 = nn.linear %h31, %w32 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h33 = nn.linear %h32, %w33 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h34 = nn.linear %h33, %w34 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h35 = nn.linear %h34, %w35 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h36 = nn.linear %h35, %w36 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h37 = nn.linear %h36, %w37 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h38 = nn.linear %h37, %w38 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h39 = nn.linear %h38, %w39 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h40 = nn.linear %h39, %w40 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h41 = nn.linear %h40, %w41 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h42 = nn.linear %h41, %w42 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h43 = nn.linear %h42, %w43 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h44 = nn.linear %h43, %w44 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h45 = nn.linear %h44, %w45 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h46 = nn.linear %h45, %w46 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h47 = nn.linear %h46, %w47 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h48 = nn.linear %h47, %w48 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h49 = nn.linear %h48, %w49 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h50 = nn.linear %h49, %w50 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h51 = nn.linear %h50, %w51 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h52 = nn.linear %h51, %w52 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h53 = nn.linear %h52, %w53 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h54 = nn.linear %h53, %w54 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h55 = nn.linear %h54, %w55 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h56 = nn.linear %h55, %w56 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h57 = nn.linear %h56, %w57 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h58 = nn.linear %h57, %w58 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h59 = nn.linear %h58, %w59 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h60 = nn.linear %h59, %w60 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h61 = nn.linear %h60, %w61 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h62 = nn.linear %h61, %w62 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h63 = nn.linear %h62, %w63 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h64 = nn.linear %h63, %w64 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h65 = nn.linear %h64, %w65 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h66 = nn.linear %h65, %w66 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h67 = nn.linear %h66, %w67 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h68 = nn.linear %h67, %w68 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h69 = nn.linear %h68, %w69 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h70 = nn.linear %h69, %w70 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h71 = nn.linear %h70, %w71 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h72 = nn.linear %h71, %w72 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h73 = nn.linear %h72, %w73 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %h74 = nn.linear %h73, %w74 : (tensor<64x10000xf32>, tensor<10000x10000xf32>) -> tensor<64x10000xf32>
  %l = nn.cross_entropy %h74, %y : (tensor<64x10000xf32>, tensor<64xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
