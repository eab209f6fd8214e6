// expect: race at line 7
// argus: block-dim 256
// argus: size data = n
// argus: size hist = 256
__global__ void hist_racy(const unsigned *data, unsigned *hist, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) hist[data[i] & 255u] += 1u;
}
