// Simulation model of the Lattice ECP5 MULT18X18D (sysDSP 18x18 multiplier) as tensorforge
// instantiates it (hw/dsp.py): the A and B input registers and the output register, each on
// CLK0 with clock enable CE0 and synchronous reset RST0 (RESETMODE "SYNC"; reset wins over
// the enable), or bypassed where its REG_*_CLK is "NONE"; no pipeline register; SIGNEDA/SIGNEDB
// pick two's complement operands. Neither Yosys nor nextpnr ship a simulation model of this
// primitive; this one follows Lattice's ECP5 sysDSP usage guide. C, SOURCEA/B and
// the other clocks are accepted and ignored.
module MULT18X18D (
    input A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0,
    input B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0,
    input C17, C16, C15, C14, C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input CLK0, CE0, RST0,
    output P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter RESETMODE = "SYNC";
    parameter GSR = "ENABLED";

    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_q = 18'd0, b_q = 18'd0;
    reg [35:0] p_q = 36'd0;
    wire [17:0] a_in = REG_INPUTA_CLK == "NONE" ? a : a_q;
    wire [17:0] b_in = REG_INPUTB_CLK == "NONE" ? b : b_q;
    wire signed [18:0] a_ext = {SIGNEDA & a_in[17], a_in};
    wire signed [18:0] b_ext = {SIGNEDB & b_in[17], b_in};
    wire signed [37:0] product = a_ext * b_ext;
    wire [35:0] p = REG_OUTPUT_CLK == "NONE" ? product[35:0] : p_q;
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = p;

    always @(posedge CLK0) begin
        if (RST0) begin
            a_q <= 18'd0;
            b_q <= 18'd0;
            p_q <= 36'd0;
        end else if (CE0) begin
            a_q <= a;
            b_q <= b;
            p_q <= product[35:0];
        end
    end
endmodule
