// Simulation model of the Lattice ECP5 DP16KD (sysMEM 18 Kbit true dual-port block RAM) as
// tensorforge instantiates it (hw/ecp5_bram.py): both ports at the same data width, 1, 2, 4,
// 9 or 18 bits (16K, 8K, 4K, 2K or 1K rows); the row address on the top pins (ADx13..ADx0 at
// x1, ADx13..ADx3 at x9, ADx13..ADx4 at x18, where ADx1/ADx0 enable the upper/lower 9-bit
// half of a write). Each port, on its clock's rising edge with CEx high and its chip selects
// equal to CSDECODE_x: writes DIx where WEx is high, and otherwise reads its row into the
// port's read latch (WRITEMODE "NORMAL": a write leaves the latch as it was; "WRITETHROUGH":
// the latch takes the written data; "READBEFOREWRITE": the old row). REGMODE "NOREG" shows
// the latch on DOx; "OUTREG" registers it (clock enable OCEx), so a read's data appears one
// edge later. RSTx clears the latch and the output register at the clock edge (RESETMODE
// "SYNC"). A read of a row the other port writes at the same edge gets the old row. Contents
// start at zero (INITVAL_* are not modelled). Neither Yosys nor nextpnr ship a simulation
// model of this primitive; this one follows Lattice's ECP5 memory usage guide. GSR and
// ASYNC_RESET_RELEASE are accepted and ignored.
module DP16KD (
    input DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
    input ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0,
    input CEA, OCEA, CLKA, WEA, RSTA,
    input CSA2, CSA1, CSA0,
    output DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
    input DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
    input ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0,
    input CEB, OCEB, CLKB, WEB, RSTB,
    input CSB2, CSB1, CSB0,
    output DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
    parameter DATA_WIDTH_A = 18;
    parameter DATA_WIDTH_B = 18;
    parameter REGMODE_A = "NOREG";
    parameter REGMODE_B = "NOREG";
    parameter WRITEMODE_A = "NORMAL";
    parameter WRITEMODE_B = "NORMAL";
    parameter CSDECODE_A = "0b000";
    parameter CSDECODE_B = "0b000";
    parameter RESETMODE = "SYNC";
    parameter ASYNC_RESET_RELEASE = "SYNC";
    parameter GSR = "ENABLED";

    // the pin carrying row bit 0 at a data width
    function integer low_pin(input integer width);
        low_pin = width == 18 ? 4 : width == 9 ? 3 : width == 4 ? 2 : width == 2 ? 1 : 0;
    endfunction
    localparam integer LOW_A = low_pin(DATA_WIDTH_A);
    localparam integer LOW_B = low_pin(DATA_WIDTH_B);
    // CSDECODE_x is "0bXYZ": its last three characters, CSx2 CSx1 CSx0, are '0' or '1'
    wire [2:0] select_a = {CSDECODE_A[16], CSDECODE_A[8], CSDECODE_A[0]};
    wire [2:0] select_b = {CSDECODE_B[16], CSDECODE_B[8], CSDECODE_B[0]};

    wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
    wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
    wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire [17:0] dib = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
    wire [13:0] row_a = ada >> LOW_A;
    wire [13:0] row_b = adb >> LOW_B;
    // the bits a write changes: the data width, and at x18 only the halves enabled on ADx1/ADx0
    wire [17:0] width_mask_a = (18'd1 << DATA_WIDTH_A) - 18'd1;
    wire [17:0] width_mask_b = (18'd1 << DATA_WIDTH_B) - 18'd1;
    wire [17:0] mask_a = DATA_WIDTH_A == 18 ? {{9{ADA1}}, {9{ADA0}}} : width_mask_a;
    wire [17:0] mask_b = DATA_WIDTH_B == 18 ? {{9{ADB1}}, {9{ADB0}}} : width_mask_b;
    wire active_a = CEA && {CSA2, CSA1, CSA0} == select_a;
    wire active_b = CEB && {CSB2, CSB1, CSB0} == select_b;

    reg [17:0] rows [0:16383];
    reg [17:0] latch_a = 18'd0, latch_b = 18'd0, out_a = 18'd0, out_b = 18'd0;
    integer i;
    initial begin
        if (DATA_WIDTH_A != DATA_WIDTH_B) begin
            $display("DP16KD model: DATA_WIDTH_A (%0d) and DATA_WIDTH_B (%0d) must be equal",
                     DATA_WIDTH_A, DATA_WIDTH_B);
            $finish;
        end
        for (i = 0; i < 16384; i = i + 1) rows[i] = 18'd0;
    end

    wire [17:0] old_a = rows[row_a];
    wire [17:0] old_b = rows[row_b];
    wire [17:0] new_a = (old_a & ~mask_a) | (dia & mask_a);
    wire [17:0] new_b = (old_b & ~mask_b) | (dib & mask_b);

    always @(posedge CLKA) begin
        if (active_a && WEA) rows[row_a] <= new_a;
        if (RSTA) latch_a <= 18'd0;
        else if (active_a && !WEA) latch_a <= old_a & width_mask_a;
        else if (active_a && WRITEMODE_A == "WRITETHROUGH") latch_a <= new_a & width_mask_a;
        else if (active_a && WRITEMODE_A == "READBEFOREWRITE") latch_a <= old_a & width_mask_a;
        if (RSTA) out_a <= 18'd0;
        else if (OCEA) out_a <= latch_a;
    end

    always @(posedge CLKB) begin
        if (active_b && WEB) rows[row_b] <= new_b;
        if (RSTB) latch_b <= 18'd0;
        else if (active_b && !WEB) latch_b <= old_b & width_mask_b;
        else if (active_b && WRITEMODE_B == "WRITETHROUGH") latch_b <= new_b & width_mask_b;
        else if (active_b && WRITEMODE_B == "READBEFOREWRITE") latch_b <= old_b & width_mask_b;
        if (RSTB) out_b <= 18'd0;
        else if (OCEB) out_b <= latch_b;
    end

    wire [17:0] doa = REGMODE_A == "OUTREG" ? out_a : latch_a;
    wire [17:0] dob = REGMODE_B == "OUTREG" ? out_b : latch_b;
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = doa;
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob;
endmodule
