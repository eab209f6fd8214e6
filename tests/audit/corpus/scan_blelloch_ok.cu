// expect: clean
// argus: block-dim 128
// argus: size data = 256 * grid_dim.x
__global__ void scan_blelloch(float *data) {
  __shared__ float s[256];
  int t = threadIdx.x;
  float *d = data + blockIdx.x * 256;
  s[2 * t] = d[2 * t];
  s[2 * t + 1] = d[2 * t + 1];
  int off = 1;
  for (int k = 128; k > 0; k >>= 1) {
    __syncthreads();
    if (t < k) {
      int a = off * (2 * t + 1) - 1, b = off * (2 * t + 2) - 1;
      s[b] += s[a];
    }
    off *= 2;
  }
  if (t == 0) s[255] = 0.0f;
  for (int k = 1; k < 256; k *= 2) {
    off >>= 1;
    __syncthreads();
    if (t < k) {
      int a = off * (2 * t + 1) - 1, b = off * (2 * t + 2) - 1;
      float x = s[a];
      s[a] = s[b];
      s[b] += x;
    }
  }
  __syncthreads();
  d[2 * t] = s[2 * t];
  d[2 * t + 1] = s[2 * t + 1];
}
