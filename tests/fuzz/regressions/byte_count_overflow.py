class G(torch.nn.Module):
    def forward(self, x: "f32[4294967296, 4294967296]"):
        return (x,)
