// tensorforge_axi_dram: an AXI4 subordinate memory for simulation only (Verilator).
//
// The fast DRAM model of tensorforge.sim (see sim_top.py, which instantiates it beside the
// accelerator): the whole memory system runs in the simulator, so a program runs without
// Python each cycle. Its timing is a MemorySystem (tensorforge/memory.py), set at run time
// through the cfg_* inputs, so one Verilator model serves every memory:
//
// * Reads: an AR handshake at edge c queues the burst; its first beat may be presented from
//   edge c + 1 + cfg_latency on (rvalid high after that edge), so cfg_latency = 0 answers as
//   fast as a memory with a registered output can. Bursts queue in order and are pipelined:
//   the latencies of queued bursts overlap, and their beats follow back to back.
// * Writes: W beats are taken for the oldest burst whose AW has arrived; the B response may be
//   presented from edge c + 1 + cfg_latency on, c the edge of the burst's last W beat.
// * Bandwidth: per direction, a token bucket earns cfg_rate / 2^16 beats per cycle and holds
//   at most one; an R beat is issued, a W beat accepted, only with a token in hand.
// * Outstanding: at most cfg_outstanding read bursts (AR accepted, last R beat not yet taken)
//   and cfg_outstanding write bursts (AW accepted, B not yet taken); arready/awready fall at
//   the limit. MAX_OUTSTANDING bounds cfg_outstanding (the queues' depth).
// * Errors: a beat at or past cfg_size_words answers SLVERR (reads return zeros). A write
//   whose strobed bytes do not lie inside one of the cfg_writable_count ranges
//   [cfg_writable_start[i], cfg_writable_end[i]) is refused (not written, SLVERR) and the first
//   such beat is recorded: violation goes high and stays high until reset, with the address
//   and length of its strobed bytes.
// * Image: with image_load high at a clock edge the memory is read from the $readmemh file
//   named by image_path (text packed in a vector, as Verilog strings are); with image_dump
//   high, words [0, cfg_dump_words) are written to image_path with $writememh. One hex word
//   per line, one bus word (little-endian bytes) per word.
//
// Every burst is INCR with full-width beats at a bus-aligned address (the accelerator's DMA
// issues nothing else); AxSIZE and AxBURST are not looked at.

module tensorforge_axi_dram #(
    parameter DATA_BITS = 64,
    parameter ADDR_BITS = 32,
    parameter ID_BITS = 1,
    parameter WORD_BITS = 23,          // log2 of the capacity in bus words
    parameter QUEUE_BITS = 8,          // log2 of MAX_OUTSTANDING
    parameter RANGES = 4,              // writable ranges
    parameter PATH_BITS = 8 * 1024     // longest image path, in bits
) (
    input  wire                      clk,
    input  wire                      rst,

    input  wire [ID_BITS-1:0]        s_arid,
    input  wire [ADDR_BITS-1:0]      s_araddr,
    input  wire [7:0]                s_arlen,
    input  wire                      s_arvalid,
    output wire                      s_arready,
    output reg  [ID_BITS-1:0]        s_rid,
    output reg  [DATA_BITS-1:0]      s_rdata,
    output reg  [1:0]                s_rresp,
    output reg                       s_rlast,
    output reg                       s_rvalid,
    input  wire                      s_rready,

    input  wire [ID_BITS-1:0]        s_awid,
    input  wire [ADDR_BITS-1:0]      s_awaddr,
    input  wire [7:0]                s_awlen,
    input  wire                      s_awvalid,
    output wire                      s_awready,
    input  wire [DATA_BITS-1:0]      s_wdata,
    input  wire [DATA_BITS/8-1:0]    s_wstrb,
    input  wire                      s_wlast,
    input  wire                      s_wvalid,
    output wire                      s_wready,
    output reg  [ID_BITS-1:0]        s_bid,
    output reg  [1:0]                s_bresp,
    output reg                       s_bvalid,
    input  wire                      s_bready,

    input  wire [31:0]               cfg_latency,
    input  wire [16:0]               cfg_rate,
    input  wire [QUEUE_BITS:0]       cfg_outstanding,
    input  wire [WORD_BITS:0]        cfg_size_words,
    input  wire [WORD_BITS:0]        cfg_dump_words,
    input  wire [3:0]                cfg_writable_count,
    input  wire [64*RANGES-1:0]      cfg_writable_start,
    input  wire [64*RANGES-1:0]      cfg_writable_end,
    input  wire [PATH_BITS-1:0]      image_path,
    input  wire                      image_load,
    input  wire                      image_dump,

    output reg                       violation,
    output reg  [63:0]               violation_address,
    output reg  [15:0]               violation_length,
    output reg  [31:0]               violations
);
    localparam BYTES = DATA_BITS / 8;
    localparam OFFSET_BITS = $clog2(BYTES);
    localparam DEPTH = 1 << QUEUE_BITS;
    localparam [16:0] ONE = 17'h10000;
    localparam [1:0] OKAY = 2'd0, SLVERR = 2'd2;

    reg [DATA_BITS-1:0] mem [0:(1 << WORD_BITS) - 1];
    reg [63:0] now;

    // ------------------------------------------------------------------ reads
    reg [ADDR_BITS-1:0] ar_word [0:DEPTH-1];
    reg [7:0]           ar_len  [0:DEPTH-1];
    reg [ID_BITS-1:0]   ar_id   [0:DEPTH-1];
    reg [63:0]          ar_time [0:DEPTH-1];
    reg [QUEUE_BITS:0]  ar_head, ar_tail, reads_open;
    reg [7:0]           r_beat;
    reg [16:0]          r_tokens;

    wire [QUEUE_BITS-1:0] ar_at = ar_head[QUEUE_BITS-1:0];
    wire ar_fire = s_arvalid && s_arready;
    wire r_fire = s_rvalid && s_rready;
    wire r_ready_head = (ar_head != ar_tail) && (now >= ar_time[ar_at]);
    wire r_issue = (!s_rvalid || s_rready) && r_ready_head && (r_tokens >= ONE);
    wire [ADDR_BITS-1:0] r_word = ar_word[ar_at] + {{(ADDR_BITS-8){1'b0}}, r_beat};
    wire r_last = r_beat == ar_len[ar_at];
    assign s_arready = !rst && (reads_open < cfg_outstanding);

    // ------------------------------------------------------------------ writes
    reg [ADDR_BITS-1:0] aw_word [0:DEPTH-1];
    reg [ID_BITS-1:0]   aw_id   [0:DEPTH-1];
    reg [QUEUE_BITS:0]  aw_head, aw_tail, writes_open;
    reg [7:0]           w_beat;
    reg                 w_refused;   // a beat of the current burst was refused
    reg [16:0]          w_tokens;
    reg [ID_BITS-1:0]   b_id   [0:DEPTH-1];
    reg [1:0]           b_resp [0:DEPTH-1];
    reg [63:0]          b_time [0:DEPTH-1];
    reg [QUEUE_BITS:0]  b_head, b_tail;

    wire aw_fire = s_awvalid && s_awready;
    wire w_fire = s_wvalid && s_wready;
    wire b_fire = s_bvalid && s_bready;
    wire [QUEUE_BITS-1:0] w_at = aw_head[QUEUE_BITS-1:0];
    wire [QUEUE_BITS-1:0] b_at = b_head[QUEUE_BITS-1:0];
    wire [ADDR_BITS-1:0] w_word = aw_word[w_at] + {{(ADDR_BITS-8){1'b0}}, w_beat};
    wire b_issue = (!s_bvalid || s_bready) && (b_head != b_tail) && (now >= b_time[b_at]);
    assign s_awready = !rst && (writes_open < cfg_outstanding);
    assign s_wready = !rst && (aw_head != aw_tail) && (w_tokens >= ONE);

    // The strobed bytes of the W beat: [w_first, w_first + w_count), and whether they lie
    // inside the memory and inside one writable range.
    reg [63:0] w_first, w_count;
    reg        w_allowed;
    integer lane, range_index;
    always @(*) begin
        w_first = 0;
        w_count = 0;
        for (lane = BYTES - 1; lane >= 0; lane = lane - 1)
            if (s_wstrb[lane]) w_first = lane;
        for (lane = 0; lane < BYTES; lane = lane + 1)
            if (s_wstrb[lane]) w_count = lane + 1 - w_first;
        w_first = w_first + ({{(64 - ADDR_BITS){1'b0}}, w_word} << OFFSET_BITS);
        w_allowed = w_count == 0;
        if ({{(64 - ADDR_BITS){1'b0}}, w_word} < {{(63 - WORD_BITS){1'b0}}, cfg_size_words})
            for (range_index = 0; range_index < RANGES; range_index = range_index + 1)
                if (range_index < cfg_writable_count
                        && w_first >= cfg_writable_start[64*range_index +: 64]
                        && w_first + w_count <= cfg_writable_end[64*range_index +: 64])
                    w_allowed = 1;
    end

    // A bucket that earns cfg_rate per cycle, holds at most ONE and pays ONE per beat.
    function [16:0] refill(input [16:0] tokens, input spent);
        reg [17:0] earned;
        begin
            earned = {1'b0, tokens} - (spent ? {1'b0, ONE} : 18'd0) + {1'b0, cfg_rate};
            refill = earned > {1'b0, ONE} ? ONE : earned[16:0];
        end
    endfunction

    integer write_lane;
    always @(posedge clk) begin
        if (image_load) $readmemh(image_path, mem);
        if (image_dump) $writememh(image_path, mem, 0, cfg_dump_words - 1);
        if (rst) begin
            now <= 0;
            ar_head <= 0;
            ar_tail <= 0;
            reads_open <= 0;
            r_beat <= 0;
            r_tokens <= ONE;
            s_rvalid <= 0;
            aw_head <= 0;
            aw_tail <= 0;
            writes_open <= 0;
            w_beat <= 0;
            w_refused <= 0;
            w_tokens <= ONE;
            b_head <= 0;
            b_tail <= 0;
            s_bvalid <= 0;
            violation <= 0;
            violation_address <= 0;
            violation_length <= 0;
            violations <= 0;
        end else begin
            now <= now + 1;

            // reads
            if (ar_fire) begin
                ar_word[ar_tail[QUEUE_BITS-1:0]] <= s_araddr >> OFFSET_BITS;
                ar_len[ar_tail[QUEUE_BITS-1:0]] <= s_arlen;
                ar_id[ar_tail[QUEUE_BITS-1:0]] <= s_arid;
                ar_time[ar_tail[QUEUE_BITS-1:0]] <= now + 1 + {32'b0, cfg_latency};
                ar_tail <= ar_tail + 1;
            end
            reads_open <= reads_open + (ar_fire ? 1 : 0) - ((r_fire && s_rlast) ? 1 : 0);
            if (!s_rvalid || s_rready) s_rvalid <= r_issue;
            if (r_issue) begin
                if ({{(64 - ADDR_BITS){1'b0}}, r_word} < {{(63 - WORD_BITS){1'b0}}, cfg_size_words}) begin
                    s_rdata <= mem[r_word[WORD_BITS-1:0]];
                    s_rresp <= OKAY;
                end else begin
                    s_rdata <= 0;
                    s_rresp <= SLVERR;
                end
                s_rid <= ar_id[ar_at];
                s_rlast <= r_last;
                r_beat <= r_last ? 8'd0 : r_beat + 1;
                if (r_last) ar_head <= ar_head + 1;
            end
            r_tokens <= refill(r_tokens, r_issue);

            // writes
            if (aw_fire) begin
                aw_word[aw_tail[QUEUE_BITS-1:0]] <= s_awaddr >> OFFSET_BITS;
                aw_id[aw_tail[QUEUE_BITS-1:0]] <= s_awid;
                aw_tail <= aw_tail + 1;
            end
            writes_open <= writes_open + (aw_fire ? 1 : 0) - (b_fire ? 1 : 0);
            if (w_fire) begin
                if (w_allowed) begin
                    for (write_lane = 0; write_lane < BYTES; write_lane = write_lane + 1)
                        if (s_wstrb[write_lane])
                            mem[w_word[WORD_BITS-1:0]][8*write_lane +: 8]
                                <= s_wdata[8*write_lane +: 8];
                end else begin
                    violations <= violations + 1;
                    if (!violation) begin
                        violation <= 1;
                        violation_address <= w_first;
                        violation_length <= w_count[15:0];
                    end
                end
                if (s_wlast) begin
                    b_id[b_tail[QUEUE_BITS-1:0]] <= aw_id[w_at];
                    b_resp[b_tail[QUEUE_BITS-1:0]] <= (w_refused || !w_allowed) ? SLVERR : OKAY;
                    b_time[b_tail[QUEUE_BITS-1:0]] <= now + 1 + {32'b0, cfg_latency};
                    b_tail <= b_tail + 1;
                    aw_head <= aw_head + 1;
                    w_beat <= 0;
                    w_refused <= 0;
                end else begin
                    w_beat <= w_beat + 1;
                    w_refused <= w_refused || !w_allowed;
                end
            end
            w_tokens <= refill(w_tokens, w_fire);
            if (!s_bvalid || s_bready) s_bvalid <= b_issue;
            if (b_issue) begin
                s_bid <= b_id[b_at];
                s_bresp <= b_resp[b_at];
                b_head <= b_head + 1;
            end
        end
    end
endmodule
