// expect: clean
// argus: block-dim 256
// argus: size data = n
// argus: size hist = 256
__global__ void hist_shared(const unsigned *data, unsigned *hist, int n) {
  __shared__ unsigned h[256];
  int t = threadIdx.x;
  h[t] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&h[data[i] & 255u], 1u);
  __syncthreads();
  atomicAdd(&hist[t], h[t]);
}
